"""The proxy's CPU per request against another checkout, side by side: each round runs
``bench_proxy_cpu.py --layers app`` once in this tree and once in the other (each with its own
benchmark and its own ``src``, in a fresh process, in random order), and the medians and the
ratio of each round's pair are printed. Alternating fresh processes keeps a busy machine's
load on both sides alike; the ratios are the figure to read, not the microseconds.

    git worktree add /tmp/base 00b954b
    python benchmarks/ab_proxy_cpu.py /tmp/base --paths native,emulated --rounds 10

CPU seconds on a shared machine scatter by ±15% from round to round. ``--instructions`` counts
instead, under valgrind's callgrind: the instructions the CPU executes per request, the same
from run to run (hash seed fixed), whatever else the machine does. Each path runs twice a
side, with 50 and 250 requests, and the difference is divided by 200, so the start-up (imports,
the app's set-up) drops out. About a minute a run under valgrind, two runs at a time:

    python benchmarks/ab_proxy_cpu.py /tmp/base --instructions --paths plain,emulated

It prints figures and never asserts on them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run(tree: Path, paths: str, requests: int) -> dict[str, float]:
    """One run of ``tree``'s benchmark on ``tree``'s code: µs per request by layer/path."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_proxy_cpu.py", "--layers", "app", "--paths", paths,
         "--requests", str(requests), "--rounds", "3"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{tree}: the benchmark failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


_FEW, _MANY = 50, 250  # requests of the two runs whose difference is counted


def instructions(tree: Path, path: str, requests: int) -> int:
    """The instructions one run of ``tree``'s benchmark executes under callgrind, start-up
    included."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "benchmarks/bench_proxy_cpu.py", "--layers", "app", "--paths", path,
         "--requests", str(requests), "--rounds", "1"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or not found:
        raise SystemExit(f"{tree}: the benchmark failed under valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def count_instructions(sides: dict[str, Path], paths: list[str]) -> None:
    if not shutil.which("valgrind"):
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    jobs = [(side, path, n) for path in paths for side in sides for n in (_FEW, _MANY)]
    print(f"{len(jobs)} runs under valgrind, two at a time …", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(2) as pool:
        counts = dict(
            zip(jobs, pool.map(lambda job: instructions(sides[job[0]], job[1], job[2]), jobs),
                strict=True)
        )  # fmt: skip
    print(f"instructions per request (thousands), the difference of {_MANY} and {_FEW} requests")
    print(f"{'path':<26}{'other':>9}{'this':>9}{'ratio':>8}")
    for path in paths:
        per = {
            side: (counts[side, path, _MANY] - counts[side, path, _FEW]) / (_MANY - _FEW)
            for side in sides
        }
        print(f"{path:<26}{per['other'] / 1e3:9.0f}{per['this'] / 1e3:9.0f}"
              f"{per['this'] / per['other']:8.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout (e.g. a git worktree)")
    parser.add_argument("--paths", default="plain,native,emulated,resp-plain")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=300, help="requests per run and path")
    parser.add_argument(
        "--instructions", action="store_true",
        help="count instructions under valgrind instead of timing CPU (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    sides = {"other": args.other.resolve(), "this": HERE}
    if args.instructions:
        count_instructions(sides, args.paths.split(","))
        return
    found: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    for done in range(1, args.rounds + 1):
        for side in random.sample(list(sides), len(sides)):
            for key, value in run(sides[side], args.paths, args.requests).items():
                found[side].setdefault(key, []).append(value)
        print(f"round {done}/{args.rounds}", file=sys.stderr, flush=True)
    print(f"CPU per request (µs), {args.rounds} rounds of {args.requests} requests a path")
    print(f"{'path':<26}{'other':>9}{'this':>9}{'ratio':>8}  per-round ratio: median (quartiles)")
    for key in found["this"]:
        other, this = found["other"][key], found["this"][key]
        ratios = sorted(b / a for a, b in zip(other, this, strict=True))
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        print(
            f"{key.removeprefix('app/'):<26}{statistics.median(other):9.1f}"
            f"{statistics.median(this):9.1f}"
            f"{statistics.median(this) / statistics.median(other):8.3f}  "
            f"{statistics.median(ratios):.3f} ({quartiles[0]:.3f}–{quartiles[2]:.3f})"
        )


if __name__ == "__main__":
    main()
