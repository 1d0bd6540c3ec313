"""``--registry`` URLs that are wrong or point nowhere: one line that says so, never a traceback,
never the password, and never a false "the store is back"."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from toolshim.capabilities.registry import Registry
from toolshim.capabilities.store import scrub
from toolshim.capabilities.stores import open_store
from toolshim.cli.main import app
from toolshim.errors import ConfigError

SECRET = "t0p%40secret"

MALFORMED = [
    f"redis://:{SECRET}@127.0.0.1:notaport/0",
    f"redis://:{SECRET}@127.0.0.1:1/0?no_such_option=1",
    f"redis://:{SECRET}@127.0.0.1:1/0?socket_timeout=abc",
    f"postgresql://u:{SECRET}@127.0.0.1:notaport/db",
    f"postgresql://u:{SECRET}@127.0.0.1:1/db?no_such_option=1",
    f"postgresql://u:{SECRET}@[::1/db",
]
AWAY = [f"redis://:{SECRET}@127.0.0.1:1/0", f"postgresql://u:{SECRET}@127.0.0.1:1/db"]


def no_secret(text: str) -> bool:
    return "t0p" not in text and "secret" not in text


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_url_is_a_config_error_naming_it_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError, match="malformed") as caught:
        open_store(url)
    assert no_secret(caught.value.message)
    assert "***" in caught.value.message


@pytest.mark.parametrize("url", MALFORMED)
def test_the_cli_says_a_malformed_url_in_one_line(url: str) -> None:
    result = CliRunner().invoke(app, ["models", "list", "--registry", url])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: the registry URL"), result.stderr
    assert no_secret(result.output)


@pytest.mark.parametrize("url", AWAY)
@pytest.mark.parametrize("command", [["list"], ["show", "some-model"]])
def test_models_list_and_show_fail_when_the_shared_store_is_away(
    url: str, command: list[str]
) -> None:
    """Not an empty table as if the store were empty: exit 1 and why."""
    result = CliRunner().invoke(app, ["models", *command, "--registry", url])
    assert result.exit_code == 1, result.output
    assert "cannot be used" in result.stderr
    assert "127.0.0.1:1" in result.stderr
    assert no_secret(result.output)


@pytest.mark.parametrize("url", AWAY)
def test_a_store_that_was_never_there_is_never_said_to_be_back(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    registry = Registry.open(url, profiles=False)
    assert not registry.available
    assert registry.outage is not None and no_secret(registry.outage)
    registry.facts("http://up/v1", "m")
    registry.close()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unavailable" in m for m in messages) == 1, messages
    assert not any("is back;" in m for m in messages), messages
    assert all(no_secret(m) for m in messages)


def test_scrub_hides_a_password_as_written_and_percent_decoded() -> None:
    assert scrub("auth t0p%40secret and t0p@secret", SECRET) == "auth *** and ***"
    assert scrub("nothing here", None) == "nothing here"
