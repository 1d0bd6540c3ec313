"""``toolshim eval --parallel N`` against a serial run, on the embedded model, side by side.

Runs the same BFCL cases twice through the real CLI on the embedded llama.cpp: once serially
(one slot), once with ``--parallel N`` (N slots, N cases at once). Prints each run's wall time
(the report's own ``wall_s``, model start-up excluded), the speed-up, and how many cases came
out the same: the same verdict and the same raw reply. Figures are printed, never asserted
(the machine may be busy: compare the columns of one run).

    python benchmarks/bench_eval_parallel.py                          # 0.5B, 2 cases a category
    python benchmarks/bench_eval_parallel.py --local-model qwen2.5-coder-1.5b --limit 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run(args: argparse.Namespace, parallel: int, output: Path) -> tuple[dict[str, Any], float]:
    """One eval run through the CLI; its report and the wall time of the whole command."""
    command = [
        str(Path(sys.executable).parent / "toolshim"),
        "eval",
        "--local-model",
        args.local_model,
        "--config",
        args.config,
        "--baseline",
        "none",
        "--limit",
        str(args.limit),
        "--parallel",
        str(parallel),
        "-o",
        str(output),
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(output.read_text()), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local-model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--config", default="auto+served")
    parser.add_argument("--limit", type=int, default=2, help="cases per category")
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        serial, serial_total = run(args, 1, Path(tmp) / "serial.json")
        parallel, parallel_total = run(args, args.parallel, Path(tmp) / "parallel.json")
    one = {c["case_id"]: c for c in serial["cases"]}
    other = {c["case_id"]: c for c in parallel["cases"]}
    same_verdict = sum(one[k]["valid"] == other[k]["valid"] for k in one if k in other)
    same_reply = sum(one[k]["raw_output"] == other[k]["raw_output"] for k in one if k in other)
    s_wall, p_wall = serial["meta"]["wall_s"], parallel["meta"]["wall_s"]
    print(f"model {args.local_model}, {args.config}, {len(one)} cases, {serial['meta']['machine']}")
    print(f"{'':24}{'serial':>12}{f'--parallel {args.parallel}':>16}")
    print(f"{'eval wall time (s)':24}{s_wall:>12.1f}{p_wall:>16.1f}")
    print(f"{'whole command (s)':24}{serial_total:>12.1f}{parallel_total:>16.1f}")
    print(f"{'s per case':24}{s_wall / len(one):>12.2f}{p_wall / max(1, len(other)):>16.2f}")
    print(f"speed-up {s_wall / p_wall:.2f}x")
    print(f"same verdict {same_verdict}/{len(one)}, same raw reply {same_reply}/{len(one)}")


if __name__ == "__main__":
    main()
