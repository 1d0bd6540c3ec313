"""A pathological tool schema is a 400 naming the limit at every log level, never a 500."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from tests.security.helpers import calling_upstream
from tests.server.helpers import proxy
from toolshim.schemas import MAX_DEPTH
from toolshim.server.logs import configure_logging


@pytest.fixture(params=["info", "debug"])
def log_level(request: pytest.FixtureRequest) -> Iterator[str]:
    """toolshim's logging at the level, into a buffer; logging restored afterwards."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("toolshim").level)
    configure_logging(request.param, stream=io.StringIO())
    yield str(request.param)
    for handler in list(root.handlers):
        if handler not in saved[1]:
            root.removeHandler(handler)
    root.setLevel(saved[0])
    logging.getLogger("toolshim").setLevel(saved[2])


def nested_body(levels: int, *, stream: bool) -> str:
    """A request whose tool schema nests ``levels`` objects (written as text: json.dumps of
    the Python object would itself overflow the stack)."""
    schema = (
        '{"type": "object", "properties": {"x": ' * levels + '{"type": "string"}' + "}}" * levels
    )
    head = {
        "model": "fake-model",
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }
    tool = '{"type": "function", "function": {"name": "deep", "parameters": ' + schema + "}}"
    return json.dumps(head)[:-1] + ', "tools": [' + tool + "]}"


@pytest.mark.parametrize("levels", [250, 500])
@pytest.mark.parametrize("mode", ["force", "auto"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_schema_nested_hundreds_deep_is_a_400_naming_the_limit(
    log_level: str, levels: int, mode: str, stream: bool
) -> None:
    upstream = calling_upstream({"x": "y"}, name="deep")
    async with proxy(upstream, mode=mode) as p:
        response = await p.client.post(
            "/v1/chat/completions",
            content=nested_body(levels, stream=stream),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert f"nested more than {MAX_DEPTH} levels deep (the limit)" in error["message"]
    assert "'deep'" in error["message"]
    assert upstream.calls == 0
