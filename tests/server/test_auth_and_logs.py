"""Authorization forwarding, keys kept out of logs, and the per-request debug output."""

from __future__ import annotations

import io
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.helpers import CALL_JSON, chat, proxy
from toolshim.server.logs import configure_logging, redact
from toolshim.testing import FakeUpstream
from toolshim.testing.logs import captured_logs
from toolshim.testing.server import ScriptedUpstream, serve_fake
from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

CALLER_KEY = "sk-caller-0123456789abcdef"
UPSTREAM_KEY = "upstream-only-secret-9876"


class RecordsModelHeaders(FakeUpstream):
    async def list_models(self, *, headers: Any = None) -> dict[str, Any]:
        self.headers.append(dict(headers or {}))
        return await super().list_models(headers=headers)


async def test_the_callers_authorization_is_forwarded() -> None:
    upstream = RecordsModelHeaders(["hi"])
    auth = {"Authorization": f"Bearer {CALLER_KEY}", "OpenAI-Organization": "org-1"}
    async with proxy(upstream) as p:
        await p.client.post("/v1/chat/completions", json=chat(tools=False), headers=auth)
        await p.client.get("/v1/models", headers=auth)
    for sent in upstream.headers:
        assert sent["Authorization"] == f"Bearer {CALLER_KEY}"
    assert upstream.headers[0]["openai-organization"] == "org-1"


async def test_no_authorization_is_invented() -> None:
    upstream = FakeUpstream(["hi"])
    async with proxy(upstream) as p:
        await p.client.post("/v1/chat/completions", json=chat(tools=False))
    assert "Authorization" not in upstream.headers[0]


async def test_the_upstream_key_replaces_the_callers() -> None:
    upstream = RecordsModelHeaders(["hi"])
    async with proxy(upstream, app_options={"upstream_api_key": UPSTREAM_KEY}) as p:
        await p.client.post(
            "/v1/chat/completions",
            json=chat(tools=False),
            headers={"Authorization": f"Bearer {CALLER_KEY}"},
        )
        await p.client.get("/v1/models")
    assert [h["Authorization"] for h in upstream.headers] == [f"Bearer {UPSTREAM_KEY}"] * 2


async def test_authorization_reaches_a_real_upstream_over_http() -> None:
    scripted = ScriptedUpstream({"replies": [CALL_JSON], "tools": "reject"})
    with serve_fake(scripted) as server:
        async with proxy(AiohttpUpstream(server.base_url)) as p:
            response = await p.client.post(
                "/v1/chat/completions",
                json=chat(),
                headers={"Authorization": f"Bearer {CALLER_KEY}"},
            )
            await p.engine.aclose()
    assert response.json()["toolshim"]["llm_calls"] == 2
    # Both upstream calls (the rejected native one and the emulated one) carried the key.
    assert [h.get("Authorization") for h in scripted.headers] == [f"Bearer {CALLER_KEY}"] * 2


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """toolshim's log handler at debug, writing into a buffer; logging restored afterwards."""
    with captured_logs("debug", secrets=[UPSTREAM_KEY]) as stream:
        yield stream


@pytest.mark.parametrize("stream", [False, True])
async def test_debug_logs_show_the_exchange_but_never_a_key(
    log_stream: io.StringIO, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream = FakeUpstream([CALL_JSON], tools="reject")
    options = {"upstream_api_key": UPSTREAM_KEY}
    async with proxy(upstream, app_options=options) as p:
        response = await p.client.post(
            "/v1/chat/completions",
            json=chat(stream=stream),
            headers={"Authorization": f"Bearer {CALLER_KEY}", "x-request-id": "trace-42"},
        )
    assert response.headers["x-request-id"] == "trace-42"
    output = log_stream.getvalue()
    everything = output + caplog.text + "".join(str(r.args) for r in caplog.records)
    assert CALLER_KEY not in everything
    assert UPSTREAM_KEY not in everything
    # What was sent upstream, with roles and sizes, and what the model said.
    assert "← client request" in output
    assert re.search(r"\[0\] user\s+\|\s+29 chars", output), output
    assert re.search(r"\[0\] system\s+\|\s+\d+ chars", output), output  # the emulation prompt
    assert "upstream rejected tools" in output
    assert "raw" in output and '"get_weather"' in output
    assert re.search(r"→ 200 tool_calls mode=auto emulated=true llm_calls=\d", output)
    # Every line of this request carries its id.
    request_lines = [line for line in output.splitlines() if re.match(r"^\d{4}-", line)]
    assert request_lines and all("[trace-42]" in line for line in request_lines)


def test_the_formatter_masks_keys_that_slip_into_a_message(log_stream: io.StringIO) -> None:
    logging.getLogger("toolshim.test").warning(
        "headers were %s", {"Authorization": f"Bearer {CALLER_KEY}", "x": UPSTREAM_KEY}
    )
    output = log_stream.getvalue()
    assert CALLER_KEY not in output and UPSTREAM_KEY not in output
    assert "***" in output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ('{"api_key": "xyz"}', '{"api_key": "***"}'),
        ("key sk-proj-ABCDEFGHIJKL here", "key *** here"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_logs_follow_stderr_after_a_swapped_stderr_is_closed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CLI run under a test runner (or an app embedding toolshim) sets logging up while
    ``sys.stderr`` is a stand-in that is closed afterwards; later records must go to the
    stderr of the moment, not raise "I/O operation on closed file" on every line."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("toolshim").level)
    stand_in = io.StringIO()
    with monkeypatch.context() as patch:
        patch.setattr(sys, "stderr", stand_in)
        handler = configure_logging("info")
        logging.getLogger("toolshim.test").info("while swapped")
    stand_in.close()
    errors: list[BaseException] = []
    monkeypatch.setattr(handler, "handleError", lambda record: errors.append(sys.exc_info()[1]))
    try:
        logging.getLogger("toolshim.test").info("after the swap")
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        logging.getLogger("toolshim").setLevel(saved[2])
    assert errors == []
    assert "after the swap" in capsys.readouterr().err
