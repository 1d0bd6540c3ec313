"""Caller schemas: the time to check a hostile pattern, and a long fuzz run of arbitrary schemas.

Run it from the repository root:

    python benchmarks/bench_schema_safety.py [--examples N] [--max-seconds S]

It prints two tables:

1. ``"pattern": "^(a+)+$"`` against ``"a" * n + "!"``: Python's ``re`` (what jsonschema used
   before, on the proxy's event loop: every other client waited this long) next to the proxy's
   own check (:func:`toolshim.engine.validate.validate_calls`, on RE2). ``re`` is skipped once
   one size took longer than ``--max-seconds`` (each character doubles it);
2. a long run of the fuzz strategy in ``tests/security/schema_strategies.py``: how many schemas
   were refused with a 400, checked, or stopped at the step budget, the slowest single check,
   and any other exception (there must be none).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings
from tests.security.schema_strategies import json_values, schemas
from tests.security.test_schema_fuzz import check

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.validate import validate_calls
from toolshim.types import ToolChoice, ToolSpec

PATTERN = "^(a+)+$"


def regex_table(max_seconds: float) -> None:
    tool = ToolSpec("f", parameters={"properties": {"s": {"type": "string", "pattern": PATTERN}}})
    print(f"pattern {PATTERN!r} against 'a' * n + '!'")
    print(f"{'n':>6} {'python re (s)':>14} {'toolshim (s)':>13}")
    slow = False
    for n in (16, 18, 20, 22, 24, 26, 1000, 100_000):
        text = "a" * n + "!"
        if slow or n > 40:
            backtracking = "skipped"
        else:
            started = time.perf_counter()
            re.search(PATTERN, text)
            took = time.perf_counter() - started
            slow = took > max_seconds
            backtracking = f"{took:.4f}"
        started = time.perf_counter()
        verdict = validate_calls([ParsedCall("f", {"s": text}, "")], [tool], ToolChoice.AUTO)
        assert not verdict.ok
        print(f"{n:>6} {backtracking:>14} {time.perf_counter() - started:>13.5f}")


def fuzz_table(examples: int) -> None:
    outcomes: Counter[str] = Counter()
    slowest = [0.0]

    @settings(
        max_examples=examples, suppress_health_check=list(HealthCheck), database=None, deadline=None
    )
    @given(schema=schemas, value=json_values)
    def run(schema: object, value: object) -> None:
        started = time.perf_counter()
        outcomes[check(schema, value)] += 1
        slowest[0] = max(slowest[0], time.perf_counter() - started)

    started = time.perf_counter()
    run()
    print(f"\nfuzz: {sum(outcomes.values())} schemas in {time.perf_counter() - started:.1f} s")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {outcome:<12} {count}")
    print(f"  slowest single check: {slowest[0] * 1000:.1f} ms; other exceptions: 0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--max-seconds", type=float, default=2.0)
    args = parser.parse_args()
    regex_table(args.max_seconds)
    fuzz_table(args.examples)


if __name__ == "__main__":
    main()
