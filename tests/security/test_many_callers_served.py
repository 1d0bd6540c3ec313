"""The two-key findings against a real ``toolshim serve`` process (access keys, a SQLite
registry) over the scripted upstream (``python -m toolshim.testing.server``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import fake_upstream
from toolshim.testing import FakeUpstreamProcess, free_port, start_serve

__all__ = ["fake_upstream"]  # the scripted upstream process, a fixture of the e2e suite

pytestmark = pytest.mark.e2e

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-fedcba9876543210xx"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstreamProcess
) -> Iterator[str]:
    home = tmp_path_factory.mktemp("served")
    keys = home / "keys"
    keys.write_text(f"alice:{ALICE}\nbob:{BOB}\n")
    port = free_port()
    proxy = start_serve(
        *("--mode", "off", "--auth-keys", str(keys)),
        *("--admin-keys", "alice", "--max-messages", "8", "--store-key-quota", "64K"),
        upstream=fake_upstream.base_url,
        port=port,
        registry=home / "registry.sqlite3",
        log=home / "serve.log",
    )
    fake_upstream.script(replies=["noted"], repeat=True)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        assert proxy.stop() == 0


def as_(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_another_keys_conversation_is_neither_read_nor_continued(served: str) -> None:
    with httpx.Client(base_url=served, timeout=30) as http:
        alice = http.post(
            "/v1/responses",
            json={"model": "m", "input": "my password is hunter2"},
            headers=as_(ALICE),
        ).json()
        unknown = "resp_" + "f" * 32
        seen = {}
        for rid in (alice["id"], unknown):
            seen[rid] = [
                (r.status_code, r.text.replace(rid, "<id>"))
                for r in (
                    http.post(
                        "/v1/responses",
                        json={"model": "m", "input": "go on", "previous_response_id": rid},
                        headers=as_(BOB),
                    ),
                    http.get(f"/v1/responses/{rid}", headers=as_(BOB)),
                    http.delete(f"/v1/responses/{rid}", headers=as_(BOB)),
                )
            ]
        mine = http.get(f"/v1/responses/{alice['id']}", headers=as_(ALICE))
    assert seen[alice["id"]] == seen[unknown]
    assert [status for status, _ in seen[unknown]] == [400, 404, 404]
    assert mine.status_code == 200 and "hunter2" not in seen[alice["id"]][0][1]


def test_stored_history_is_held_to_max_messages(served: str) -> None:
    with httpx.Client(base_url=served, timeout=30) as http:
        previous = None
        statuses = []
        for n in range(8):
            body = {"model": "m", "input": f"turn {n}"}
            if previous:
                body["previous_response_id"] = previous
            answer = http.post("/v1/responses", json=body, headers=as_(BOB))
            statuses.append(answer.status_code)
            if answer.status_code != 200:
                break
            previous = answer.json()["id"]
    assert statuses == [200, 200, 200, 200, 400]
    assert "--max-messages" in answer.json()["error"]["message"]


def test_metrics_and_healthz_show_other_keys_and_the_upstream_to_whom_they_should(
    served: str,
) -> None:
    with httpx.Client(base_url=served, timeout=30) as http:
        admin = http.get("/metrics", headers=as_(ALICE)).text
        bob = http.get("/metrics", headers=as_(BOB)).text
        anonymous = http.get("/healthz").json()
        holder = http.get("/healthz", headers=as_(BOB)).json()
    assert 'key="bob"' in admin and "toolshim_key_" not in bob
    assert "url" not in anonymous["upstream"] and "127.0.0.1" in holder["upstream"]["url"]
