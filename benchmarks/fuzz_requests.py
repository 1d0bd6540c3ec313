"""The long fuzz run of the proxy's request decoding and validation (CI runs a bounded one).

The same strategies as ``tests/security/test_server_fuzz.py`` (chat requests that are nearly
right, arbitrary JSON, arbitrary bytes; Anthropic Messages and Responses requests that are
nearly right, to their routes), sent in-process through ``httpx.ASGITransport`` to the proxy
app in front of a function upstream, for ``--examples`` examples of each kind. Every answer
must be below 500, and every error an error body in the route's protocol shape; the first
failing example is shrunk and printed, and the run exits 1. Printed: examples sent per kind,
statuses seen, time per request.

    python benchmarks/fuzz_requests.py                    # 5,000 examples of each kind
    python benchmarks/fuzz_requests.py --examples 50000
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import SearchStrategy
from tests.security import test_server_fuzz as fuzz
from tests.security.fuzz_bodies import bodies, chat_like, messages_like, raw_bodies, responses_like

GAVE_UP_KEY = "502 (no tool call after the re-asks: a forced tool_choice, a model that never calls)"


def _checker(
    strategy: SearchStrategy[bytes],
    path: str,
    run: settings,
    statuses: collections.Counter[str],
) -> Callable[[], None]:
    """One hypothesis run: ``strategy``'s bodies to ``path``, statuses counted and checked."""

    @run
    @given(strategy)
    def one(body: bytes) -> None:
        response = fuzz.post(body, path)
        gave_up = response.status_code == 502 and fuzz.GAVE_UP in response.text
        statuses[GAVE_UP_KEY if gave_up else str(response.status_code)] += 1
        fuzz.check_protocol(response, body, path)

    return one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    args = parser.parse_args()
    statuses: collections.Counter[str] = collections.Counter()
    run = settings(
        max_examples=args.examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    started = time.perf_counter()
    failed = False

    def as_json(body: object) -> bytes:
        return fuzz.json.dumps(body).encode()

    chat = "/v1/chat/completions"
    for name, strategy, path in (
        ("chat-like JSON", chat_like.map(as_json), chat),
        ("arbitrary JSON", bodies.map(as_json), chat),
        ("arbitrary bytes", raw_bodies, chat),
        ("messages-like JSON", messages_like.map(as_json), "/v1/messages"),
        ("responses-like JSON", responses_like.map(as_json), "/v1/responses"),
        ("arbitrary JSON to /v1/responses", bodies.map(as_json), "/v1/responses"),
    ):
        before = sum(statuses.values())

        try:
            _checker(strategy, path, run, statuses)()
        except Exception as exc:  # the shrunk failing example, as hypothesis reports it
            print(f"{name}: FAILED: {exc}")
            failed = True
        print(f"{name}: {sum(statuses.values()) - before} requests")
    seconds = time.perf_counter() - started
    total = sum(statuses.values())
    print(f"statuses: {dict(sorted(statuses.items()))}")
    print(f"{total} requests in {seconds:.1f}s ({seconds / max(total, 1) * 1000:.2f} ms each)")
    if failed or any(status.isdigit() and int(status) >= 500 for status in statuses):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
