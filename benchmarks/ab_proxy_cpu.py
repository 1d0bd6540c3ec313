"""The proxy's CPU per request against another checkout, side by side: each round runs
``bench_proxy_cpu.py --layers app`` once in this tree and once in the other (each with its own
benchmark and its own ``src``, in a fresh process, in random order), and the medians and the
ratio of each round's pair are printed. Alternating fresh processes keeps a busy machine's
load on both sides alike; the ratios are the figure to read, not the microseconds.

    git worktree add /tmp/base 00b954b
    python benchmarks/ab_proxy_cpu.py /tmp/base --paths native,emulated --rounds 10

It prints figures and never asserts on them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout (e.g. a git worktree)")
    parser.add_argument("--paths", default="plain,native,emulated,resp-plain")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=300, help="requests per run and path")
    args = parser.parse_args()
    sides = {"other": args.other.resolve(), "this": HERE}
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
