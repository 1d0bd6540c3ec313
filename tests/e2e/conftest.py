"""Real processes on 127.0.0.1: the scripted upstream and `toolshim serve` in front of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from toolshim.testing.processes import (
    FakeUpstreamProcess,
    Process,
    free_port,
    start_fake_upstream,
    start_serve,
)


@pytest.fixture(scope="module")
def fake_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstreamProcess]:
    """The scripted upstream as its own process."""
    with start_fake_upstream(tmp_path_factory.mktemp("upstream") / "upstream.log") as upstream:
        yield upstream


ProxyFactory = Callable[..., Process]


@pytest.fixture(scope="module")
def serve(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstreamProcess
) -> Iterator[ProxyFactory]:
    """Start `toolshim serve` processes in front of the fake upstream; all stopped at the end."""
    started: list[Process] = []

    def factory(*flags: str, upstream: str | None = None) -> Process:
        port = free_port()
        home = tmp_path_factory.mktemp("proxy")
        process = start_serve(
            *flags,
            upstream=upstream or fake_upstream.base_url,
            port=port,
            registry=home / "capabilities.sqlite3",
            log=home / "serve.log",
        )
        process.url = f"http://127.0.0.1:{port}/v1"
        started.append(process)
        return process

    try:
        yield factory
    finally:
        for process in started:
            process.stop()
