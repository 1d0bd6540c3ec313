"""The long fuzz run of tool schemas through toolshim's schema checks (CI runs a bounded one).

The same strategies as ``tests/security/test_schema_fuzz.py``: arbitrary JSON Schemas (every
draft's keywords, references, nesting) as a tool's parameters, each with an arbitrary call,
through ``inspect_tools`` and ``validate_calls``. Each must be refused with a 400 naming the
schema, stopped by the step budget, or checked; any other exception is a failure, shrunk and
printed, and the run exits 1. Printed: the outcomes counted, time per schema.

    python benchmarks/fuzz_schemas.py                    # 5,000 schemas
    python benchmarks/fuzz_schemas.py --examples 50000
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings
from tests.security.schema_strategies import json_values, schemas
from tests.security.test_schema_fuzz import check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    args = parser.parse_args()
    outcomes: collections.Counter[str] = collections.Counter()
    run = settings(
        max_examples=args.examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )

    @run
    @given(schema=schemas, value=json_values)
    def one(schema: Any, value: Any) -> None:
        outcomes[check(schema, value)] += 1

    started = time.perf_counter()
    failed = False
    try:
        one()
    except Exception as exc:  # the shrunk failing example, as hypothesis reports it
        print(f"FAILED: {exc}")
        failed = True
    seconds = time.perf_counter() - started
    total = sum(outcomes.values())
    print(f"outcomes: {dict(sorted(outcomes.items()))}")
    print(f"{total} schemas in {seconds:.1f}s ({seconds / max(total, 1) * 1000:.2f} ms each)")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
