"""A caller's tool schema cannot make the proxy read a file or fetch a URL through ``$ref``."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.helpers import calling_upstream, recording_server, tool_body
from tests.server.helpers import proxy
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.errors import InvalidRequestError
from toolshim.server import create_app
from toolshim.testing import ServedApp


def _post(base_url: str, body: dict[str, Any]) -> httpx.Response:
    async def send() -> httpx.Response:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            return await client.post("/v1/chat/completions", json=body)

    return asyncio.run(send())


def test_a_file_ref_is_refused_through_the_real_proxy(tmp_path: Path) -> None:
    secret = tmp_path / "s.json"
    secret.write_text('{"enum": ["FILE-SECRET"]}')
    ref = secret.as_uri()
    upstream = calling_upstream({"city": "Paris"})
    engine = Engine(upstream, mode="force", registry=Registry())
    with ServedApp(create_app(engine)) as served:
        response = _post(served.url, tool_body({"properties": {"city": {"$ref": ref}}}))
    assert response.status_code == 400, response.text
    assert "FILE-SECRET" not in response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "tools.0.function.parameters"
    assert "'get_weather'" in error["message"] and repr(ref) in error["message"]
    assert upstream.calls == 0  # refused before anything went upstream


def test_an_http_ref_to_a_real_server_is_never_fetched() -> None:
    upstream = calling_upstream({"city": "Paris"})
    engine = Engine(upstream, mode="force", registry=Registry())
    with (
        recording_server({"enum": ["HTTP-SECRET"]}) as leak,
        ServedApp(create_app(engine)) as served,
    ):
        ref = f"{leak.base_url}/s.json"
        for stream in (False, True):
            body = tool_body({"properties": {"city": {"$ref": ref}}}, stream=stream)
            response = _post(served.url, body)
            assert response.status_code == 400, response.text
            assert "HTTP-SECRET" not in response.text
            assert repr(ref) in response.json()["error"]["message"]
    assert leak.paths == []
    assert upstream.calls == 0


@pytest.mark.parametrize("mode", ["force", "auto", "fallback", "off", "strip"])
@pytest.mark.parametrize("stream", [False, True])
async def test_every_mode_refuses_a_remote_ref_before_calling_upstream(
    mode: str, stream: bool
) -> None:
    upstream = calling_upstream({"city": "Paris"})
    body = tool_body({"properties": {"city": {"$ref": "https://example.com/s.json"}}})
    async with proxy(upstream, mode=mode) as p:
        response = await p.client.post("/v1/chat/completions", json={**body, "stream": stream})
    assert response.status_code == 400, response.text
    assert "'https://example.com/s.json'" in response.json()["error"]["message"]
    assert upstream.calls == 0


@pytest.mark.parametrize(
    "ref",
    [
        "http://127.0.0.1:9/s.json",
        "https://example.com/schema#/defs/a",
        "file:///etc/passwd",
        "file:///dev/zero",
        "s.json",
        "../s.json#/a",
        "//example.com/s.json",
        "urn:example:schema",
        "",
    ],
)
def test_only_local_references_are_allowed(ref: str) -> None:
    engine = Engine(calling_upstream({}), registry=Registry())
    for keyword in ("$ref", "$dynamicRef"):
        schema = {"type": "object", "properties": {"city": {keyword: ref}}}
        with pytest.raises(InvalidRequestError, match="only local references") as info:
            engine.turn(tool_body(schema))
        assert repr(ref) in info.value.message and "'get_weather'" in info.value.message


def test_a_remote_ref_hidden_behind_a_local_one_is_found() -> None:
    engine = Engine(calling_upstream({}), registry=Registry())
    schema = {
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/city"}},
        "$defs": {"city": {"allOf": [{"$ref": "file:///tmp/x.json"}]}},
    }
    with pytest.raises(InvalidRequestError, match=re.escape("file:///tmp/x.json")):
        engine.turn(tool_body(schema))
    # An unknown keyword is no hiding place either once a local $ref points into it.
    schema = {
        "type": "object",
        "properties": {"city": {"$ref": "#/x-stash"}},
        "x-stash": {"$ref": "http://127.0.0.1:9/s.json"},
    }
    with pytest.raises(InvalidRequestError, match=re.escape("127.0.0.1:9")):
        engine.turn(tool_body(schema))
