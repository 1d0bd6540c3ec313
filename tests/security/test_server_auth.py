"""Access keys for the proxy (--auth-keys): the file, the check, what is forwarded and logged,
and the refusal to listen beyond loopback without keys."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.helpers import chat, metric, proxy
from toolshim.errors import ConfigError
from toolshim.server.auth import AccessKeys
from toolshim.testing import FakeUpstream
from toolshim.testing.logs import captured_logs

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-fedcba9876543210xx"
UPSTREAM_KEY = "sk-upstream-0000111122223333"


@pytest.fixture
def keys(tmp_path: Path) -> AccessKeys:
    path = tmp_path / "keys"
    path.write_text(f"# team keys\nalice:{ALICE}\n\n{BOB}\n")
    return AccessKeys.load(path)


class RecordsModelHeaders(FakeUpstream):
    async def list_models(self, *, headers: Any = None) -> dict[str, Any]:
        self.headers.append(dict(headers or {}))
        return await super().list_models(headers=headers)


def test_the_key_file_names_each_key(keys: AccessKeys) -> None:
    assert keys.names == ("alice", "key4")
    assert keys.check(ALICE) == "alice"
    assert keys.check(BOB) == "key4"
    assert keys.check(ALICE[:-1]) is None
    assert keys.check("") is None
    assert ALICE not in repr(vars(keys))  # digests only


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "holds no key"),
        ("# only a comment\n", "holds no key"),
        ("short\n", "line 1: a key must be at least 16"),
        (f"a:{ALICE}\na:{BOB}\n", "line 2: key names must be unique"),
    ],
)
def test_a_bad_key_file_is_a_config_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        AccessKeys.load(path)


async def test_requests_without_a_valid_key_get_an_openai_401(keys: AccessKeys) -> None:
    async with proxy(FakeUpstream(["hi"] * 3), app_options={"auth_keys": keys}) as p:
        missing = await p.client.post("/v1/chat/completions", json=chat(tools=False))
        wrong = await p.client.post(
            "/v1/chat/completions",
            json=chat(tools=False),
            headers={"Authorization": f"Bearer {ALICE}x"},
        )
        token_scheme = await p.client.get("/v1/models", headers={"Authorization": f"Token {ALICE}"})
        metrics = await p.client.get("/metrics")
        health = await p.client.get("/healthz")
    for response in (missing, wrong, token_scheme, metrics):
        assert response.status_code == 401, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
        assert "Authorization: Bearer" in error["message"]
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert health.status_code == 200  # probes carry no key


async def test_bearer_and_x_api_key_are_accepted_and_never_forwarded(keys: AccessKeys) -> None:
    upstream = RecordsModelHeaders(["hi", "hi"])
    options = {"auth_keys": keys, "upstream_api_key": UPSTREAM_KEY, "admin_keys": ["alice"]}
    async with proxy(upstream, app_options=options) as p:
        bearer = await p.client.post(
            "/v1/chat/completions",
            json=chat(tools=False),
            headers={"Authorization": f"Bearer {ALICE}"},
        )
        anthropic_style = await p.client.post(
            "/v1/chat/completions", json=chat(tools=False), headers={"x-api-key": BOB}
        )
        models = await p.client.get("/v1/models", headers={"x-api-key": BOB})
        metrics = (await p.client.get("/metrics", headers={"x-api-key": ALICE})).text
    assert [r.status_code for r in (bearer, anthropic_style, models)] == [200, 200, 200]
    # The upstream gets the upstream key, never the caller's proxy key.
    assert [h.get("Authorization") for h in upstream.headers] == [f"Bearer {UPSTREAM_KEY}"] * 3
    assert not any(ALICE in str(h) or BOB in str(h) for h in upstream.headers)
    assert metric(metrics, "toolshim_key_requests_total", key="alice") == 2  # + /metrics
    assert metric(metrics, "toolshim_key_requests_total", key="key4") == 2
    assert ALICE not in metrics and BOB not in metrics


async def test_without_an_upstream_key_the_proxy_key_is_not_sent_upstream(
    keys: AccessKeys,
) -> None:
    upstream = FakeUpstream(["hi"])
    async with proxy(upstream, app_options={"auth_keys": keys}) as p:
        response = await p.client.post(
            "/v1/chat/completions",
            json=chat(tools=False),
            headers={"Authorization": f"Bearer {ALICE}"},
        )
    assert response.status_code == 200
    assert "Authorization" not in upstream.headers[0]


@pytest.mark.parametrize("header", ["Authorization", "x-api-key"])
async def test_a_probe_to_healthz_never_forwards_the_proxy_key_upstream(
    keys: AccessKeys, header: str
) -> None:
    """/healthz needs no key, but a probe may carry one (the same client config as the API
    calls): it is not passed on to the upstream's /models either (it was, without
    --upstream-api-key)."""
    upstream = RecordsModelHeaders(["hi"])
    value = f"Bearer {ALICE}" if header == "Authorization" else ALICE
    async with proxy(upstream, app_options={"auth_keys": keys}) as p:
        response = await p.client.get("/healthz", headers={header: value})
    assert response.status_code == 200
    assert response.json()["upstream"]["reachable"] is True
    assert len(upstream.headers) == 1
    assert ALICE not in str(upstream.headers[0])


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    with captured_logs("debug") as stream:
        yield stream


async def test_logs_name_the_key_and_never_show_it(
    keys: AccessKeys, log_stream: io.StringIO
) -> None:
    async with proxy(FakeUpstream(["hi"]), app_options={"auth_keys": keys}) as p:
        await p.client.post(
            "/v1/chat/completions",
            json=chat(tools=False),
            headers={"Authorization": f"Bearer {ALICE}"},
        )
        await p.client.post(
            "/v1/chat/completions", json=chat(tools=False), headers={"x-api-key": BOB + "z"}
        )
    output = log_stream.getvalue()
    assert "key=alice" in output
    assert "limit auth hit" in output
    assert ALICE not in output and BOB not in output


SERVE = [sys.executable, "-m", "toolshim.cli.main", "serve", "--port", "0"]


def run(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE, "--upstream", "http://127.0.0.1:9/v1", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


@pytest.mark.e2e
@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_listening_beyond_loopback_without_keys_is_refused(host: str) -> None:
    result = run("--host", host)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    first, hint = result.stderr.splitlines()[:2]
    assert first.startswith(f"error: refusing to listen on {host} without access keys")
    assert "--auth-keys" in hint and "--allow-unauthenticated" in hint


@pytest.mark.e2e
def test_a_bad_key_file_stops_serve_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("short\n")
    result = run("--auth-keys", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "line 1" in result.stderr
    assert "Traceback" not in result.stderr
