"""Credentials never reach the proxy's logs: a caller's key in any form (``Token X``, a raw
key, ``x-api-key``) is masked in every line written while serving its request."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import fake_upstream
from tests.server.helpers import chat, proxy
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FakeUpstream, FakeUpstreamProcess, free_port, start_serve
from toolshim.testing.logs import captured_logs

__all__ = ["fake_upstream"]  # the fixture, imported for this module's tests

RAW_KEY = "rawkey0123456789XYZ"


class EchoesCredentials(FakeUpstream):
    """An upstream whose 401 repeats the credentials it was sent (some servers do)."""

    async def complete_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        raise UpstreamStatusError(f"invalid credentials {dict(headers or {})}", status=401)


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    with captured_logs("debug") as stream:
        yield stream


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Token {RAW_KEY}"},
        {"Authorization": RAW_KEY},
        {"Authorization": f"Basic {RAW_KEY}"},
        {"x-api-key": RAW_KEY},
    ],
)
async def test_a_callers_key_in_any_form_is_never_logged(
    log_stream: io.StringIO, headers: dict[str, str]
) -> None:
    async with proxy(EchoesCredentials(["x"]), mode="off") as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(tools=False), headers=headers
        )
    assert response.status_code == 401
    output = log_stream.getvalue()
    assert "upstream error → 401: invalid credentials" in output
    assert RAW_KEY not in output


PASSWORD = "s3cret-pass-4242"


@pytest.mark.e2e
@pytest.mark.parametrize("reachable", [True, False])
def test_user_and_password_in_the_upstream_url_never_show(
    tmp_path: Path, fake_upstream: FakeUpstreamProcess, reachable: bool
) -> None:
    """`--upstream http://user:pass@host/v1`: the banner, the startup warning, /healthz,
    /metrics, error answers and the log show the URL without its user info; requests carrying
    a key of their own (the openai SDK always sends one) are served, the upstream getting
    the URL's user and password (on the old code: a 500, aiohttp refusing both)."""
    fake_upstream.script(replies=["hello"], repeat=True)
    port = fake_upstream.base_url.rsplit(":", 1)[1].split("/")[0] if reachable else "9"
    upstream = f"http://admin:{PASSWORD}@127.0.0.1:{port}/v1"
    proxy_port = free_port()
    process = start_serve(
        "--upstream-retries",
        "0",
        upstream=upstream,
        port=proxy_port,
        registry=tmp_path / "capabilities.sqlite3",
        log=tmp_path / "serve.log",
    )
    base = f"http://127.0.0.1:{proxy_port}"
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            seen = [
                client.get("/healthz").text,
                client.post(
                    "/v1/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"Authorization": "Bearer sk-the-callers-own-key"},
                ),
                client.post(
                    "/v1/chat/completions",
                    json={
                        "model": "m",
                        "stream": True,
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                ).text,
                client.get("/v1/models").text,
                client.get("/metrics").text,
            ]
    finally:
        process.stop()
    answer = seen.pop(1)
    assert isinstance(answer, httpx.Response)
    if reachable:
        assert answer.status_code == 200, answer.text
        sent = fake_upstream.history()["headers"][-1]
        basic = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
        assert {k.lower(): v for k, v in sent.items()}["authorization"] == f"Basic {basic}"
    else:
        assert answer.status_code == 502, answer.text
    output = process.output()
    everything = "\n".join([*map(str, seen), answer.text, output])
    assert PASSWORD not in everything
    assert f"127.0.0.1:{port}/v1" in output  # the banner still says where the upstream is
    assert "127.0.0.1" in seen[0]  # and so does /healthz
