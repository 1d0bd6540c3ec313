"""Registries on one shared store: they agree, and a store that goes away fails nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner

from tests.registry.servers import PostgresServer, RedisServer, running
from toolshim.capabilities.facts import Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.stores import open_store
from toolshim.cli.main import app

UP = "http://127.0.0.1:11434/v1"


def eventually(check: Callable[[], bool], within: float = 15.0) -> bool:
    """Whether ``check()`` becomes true before ``within`` seconds (a deadline, not a timing
    assertion: the speed is measured in benchmarks/bench_registry.py)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


@pytest.fixture(params=["postgres", "redis"])
def shared_url(request: pytest.FixtureRequest) -> str:
    server = request.getfixturevalue(f"{request.param}_server")
    return str(server.new_database())


@pytest.fixture
def replicas(shared_url: str) -> Iterator[tuple[Registry, Registry]]:
    first, second = Registry.open(shared_url), Registry.open(shared_url)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_what_one_replica_learns_the_other_acts_on(replicas: tuple[Registry, Registry]) -> None:
    a, b = replicas
    assert b.native_tools(UP, "custom-model") is Support.UNKNOWN
    a.learn(UP, "custom-model", "native_tools", "no", Source.RUNTIME_ERROR)
    assert a.native_tools(UP, "custom-model") is Support.NO  # at once where it was learned
    assert eventually(lambda: b.native_tools(UP, "custom-model") is Support.NO)
    b.learn(UP, "custom-model", "native_tools", "yes", Source.USER)
    assert eventually(lambda: a.native_tools(UP, "custom-model") is Support.YES)
    assert a.forget(None, "custom-model", sources=[Source.USER]) == 1
    assert eventually(lambda: b.native_tools(UP, "custom-model") is Support.NO)


def test_a_replica_started_later_knows_everything_at_once(shared_url: str) -> None:
    first = Registry.open(shared_url)
    try:
        first.learn(UP, "m", "dialect", "hermes", Source.USER)
        first.flush()
        later = Registry.open(shared_url)
        try:
            assert later.preferred_dialect(UP, "m") == "hermes"
            assert [m for _, m, _ in later.known()] == ["m"]
        finally:
            later.close()
    finally:
        first.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_store_that_goes_away_fails_nothing_and_gets_everything_back(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with running(kind) as server:
        assert isinstance(server, PostgresServer | RedisServer)
        url = server.new_database()
        registry = Registry.open(url)
        try:
            registry.learn(UP, "before", "native_tools", "no", Source.RUNTIME_ERROR)
            registry.flush()
            server.stop()
            # Served from the cache; learned and acted on in memory; nothing raises.
            assert registry.native_tools(UP, "before") is Support.NO
            registry.learn(UP, "during", "native_tools", "no", Source.RUNTIME_ERROR)
            registry.learn("*", "during", "dialect", "pythonic", Source.USER)
            assert registry.native_tools(UP, "during") is Support.NO
            assert eventually(lambda: not registry.available)
            assert registry.preferred_dialect(UP, "during") == "pythonic"
            assert registry.pending >= 2
            server.start()
            assert eventually(lambda: registry.pending == 0 and registry.available, 30)
            store = open_store(url)
            try:
                stored = {(m, f.name): f.value for _, m, f in store.snapshot()}
            finally:
                store.close()
            assert stored == {
                ("before", "native_tools"): "no",
                ("during", "native_tools"): "no",
                ("during", "dialect"): "pythonic",
            }
        finally:
            registry.close()
    warnings = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(warnings) == 1, warnings  # said once, not per request
    assert all("s3cret" not in r.getMessage() for r in caplog.records)


def test_the_cli_sets_and_shows_facts_in_a_shared_store_without_showing_its_password(
    shared_url: str,
) -> None:
    runner = CliRunner()
    set_result = runner.invoke(
        app, ["models", "set", "m", "--tools", "no", "--registry", shared_url, "--json"]
    )
    assert set_result.exit_code == 0, set_result.output
    shown = runner.invoke(app, ["models", "show", "m", "--registry", shared_url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert '"value": "no"' in shown.stdout
    for result in (set_result, shown):
        assert "s3cret" not in result.output


def test_setting_a_fact_while_the_store_is_away_is_an_error_not_a_silent_loss() -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["models", "set", "m", "--tools", "no", "--registry", "redis://:s3cret@127.0.0.1:1/0"],
    )
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: the capability store at redis://:***@127.0.0.1:1/0")
    assert "cannot be used" in errors[0]
    assert "lost" not in result.stderr  # refused before anything was learned
    assert "s3cret" not in result.output


def test_a_long_outage_drops_learned_writes_first_never_what_a_person_set_or_forgot(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past MAX_PENDING waiting writes the oldest learned ones go; a user's setting and a
    forget (``toolshim models forget``, chat's /forget) are written back whatever their age."""
    import toolshim.capabilities.mirror as mirror_module

    monkeypatch.setattr(mirror_module, "MAX_PENDING", 3)
    with running("redis") as server:
        assert isinstance(server, RedisServer)
        url = server.new_database()
        registry = Registry.open(url)
        try:
            registry.learn(UP, "gone", "native_tools", "no", Source.RUNTIME_ERROR)
            registry.flush()
            server.stop()
            registry.learn("*", "mine", "dialect", "pythonic", Source.USER)
            registry.forget(None, "gone")
            for n in range(6):
                registry.learn(UP, f"learned-{n}", "native_tools", "no", Source.RUNTIME_ERROR)
            assert eventually(lambda: not registry.available)
            assert registry.pending == 3
            server.start()
            assert eventually(lambda: registry.pending == 0 and registry.available, 30)
            store = open_store(url)
            try:
                stored = sorted(m for _, m, _ in store.snapshot())
            finally:
                store.close()
            assert stored == ["learned-5", "mine"]
        finally:
            registry.close()
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1, dropped  # five writes dropped, said once
