"""Benchmark the dialects: corpus accuracy, parse throughput, and prompt size against native tools.

Run it from the repository root:

    python benchmarks/bench_dialects.py [--rounds N]

It prints four tables, all measured in the same run:

1. the share of the real-output corpus (``tests/fixtures/corpus``) that each dialect's parser
   reads as intended (the calls the fixture names, or a plain answer), next to the baseline of
   seed 002's regex parser;
2. parse throughput per dialect, whole replies and streamed in 8-character deltas, in replies/s
   and MB/s of model text;
3. the prompt size of rendering 1, 10 and 50 tools, in characters and in tiktoken
   ``o200k_base`` tokens, next to the same tools as native OpenAI JSON (``tools=[...]``);
4. pathological replies: the time to parse, whole and streamed in 8-character deltas, replies
   of 4, 16 and 64 KB that a small model produces when it loops until ``max_tokens`` (a call
   list that is never closed, ever deeper nesting, a tag repeated). Parsing runs on the
   proxy's event loop, so these times are how long every other client waits. A size is
   skipped when the one before it took so long that the next (four times larger, at worst
   sixteen times slower) would exceed ``--max-seconds``. ``--pathological`` prints only this
   table.

All times are CPU seconds of the measuring process (``time.process_time``), so that other
work on a shared machine does not count as the parser's.

Before and after
----------------
``--compare OTHER_SRC`` measures tables 1, 2 and 4 for two versions of toolshim side by side
in one run: the ``src`` directory of another checkout (a ``git worktree`` of an older commit)
and this one's. Each version is measured in a subprocess of its own (the same script, with
``PYTHONPATH`` pointing at that version), alternately, ``--repeat`` times, and the best time
of each is shown with the ratio; both read this checkout's corpus, so they parse the same
replies. Only the dialects' public API is used, so any version since the corpus existed can
be measured.

Tokens without the internet
---------------------------
tiktoken downloads ``o200k_base.tiktoken`` on first use, which is blocked here. The npm package
``js-tiktoken`` ships the same ranks (``dist/ranks/o200k_base.js``, compressed); this script
rebuilds the original file from it, checks that its SHA-256 is the one tiktoken expects
(``446a9538…1a2d``), and writes it where tiktoken looks for its cache (``TIKTOKEN_CACHE_DIR``,
the file named by the SHA-1 of the download URL), so that ``tiktoken.get_encoding`` works
offline. It looks for js-tiktoken in ``$TOOLSHIM_JS_TIKTOKEN`` (the package directory or the
ranks file), in toolshim's cache directory, in ``./node_modules`` and in the global npm root.
When it finds nothing it prints the one command that installs it, and reports characters only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from toolshim.dialects import Dialect, PromptOptions, available_dialects, get_dialect
from toolshim.testing.looping import LOOPING_REPLIES, LOOPING_TOOLS, looping_reply
from toolshim.types import ToolSpec

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
JS_TIKTOKEN = "js-tiktoken@1.0.21"
CACHE = Path(platformdirs.user_cache_dir("toolshim"))
AUTO = PromptOptions()


def _clock() -> float:
    """CPU seconds of this process: the parse's own cost. On a shared machine (a load of 10 on
    2 cores is common here) wall-clock times of the same parse vary several-fold with what
    else runs; the CPU time of a pure-Python parse does not."""
    return time.process_time()


# -- the tokenizer, offline ---------------------------------------------------------------------


def load_o200k() -> Callable[[str], int] | None:
    """A token counter for o200k_base, or None (after saying what to install)."""
    try:
        import tiktoken
    except ImportError:
        print("tiktoken is not installed: pip install 'tiktoken>=0.7' (token counts skipped)\n")
        return None
    cache_dir = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or CACHE / "tiktoken")
    target = cache_dir / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if not _valid(target):
        ranks = _find_js_ranks()
        if ranks is None:
            npm = CACHE / "npm"
            print(
                "o200k_base is not available offline, so token counts are skipped.\n"
                f"Install its ranks from npm once:  npm install --prefix {npm} {JS_TIKTOKEN}\n"
                "(or point TOOLSHIM_JS_TIKTOKEN at a js-tiktoken package)\n"
            )
            return None
        data = rebuild_tiktoken_file(ranks)
        if hashlib.sha256(data).hexdigest() != O200K_SHA256:
            print(f"{ranks} does not rebuild the expected o200k_base file; token counts skipped\n")
            return None
        cache_dir.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    encoding = tiktoken.get_encoding("o200k_base")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _valid(path: Path) -> bool:
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256


def _find_js_ranks() -> Path | None:
    candidates: list[Path] = []
    env = os.environ.get("TOOLSHIM_JS_TIKTOKEN")
    if env:
        candidates += [Path(env), Path(env) / "dist" / "ranks" / "o200k_base.js"]
    roots = [CACHE / "npm" / "node_modules", ROOT / "node_modules", Path.cwd() / "node_modules"]
    npm = shutil.which("npm")
    if npm:
        found = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, check=False)
        if found.returncode == 0 and found.stdout.strip():
            roots.append(Path(found.stdout.strip()))
    candidates += [r / "js-tiktoken" / "dist" / "ranks" / "o200k_base.js" for r in roots]
    return next((c for c in candidates if c.is_file()), None)


def rebuild_tiktoken_file(ranks_js: Path) -> bytes:
    """The ``.tiktoken`` file (``base64-token rank`` lines) from js-tiktoken's compressed ranks.

    js-tiktoken stores ``bpe_ranks`` as lines ``! <offset> <token> <token> …``: consecutive
    tokens get consecutive ranks from the offset.
    """
    text = ranks_js.read_text("utf-8")
    data = json.loads(text[text.index("{") : text.rindex("}") + 1])
    ranks: dict[str, int] = {}
    for line in data["bpe_ranks"].split("\n"):
        if not line:
            continue
        _, offset, *tokens = line.split(" ")
        for i, token in enumerate(tokens):
            ranks[token] = int(offset) + i
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    return "".join(f"{token} {rank}\n" for token, rank in ordered).encode()


# -- the corpus ---------------------------------------------------------------------------------


def load_corpus() -> list[dict[str, Any]]:
    folder = Path(os.environ.get("TOOLSHIM_BENCH_CORPUS") or CORPUS)
    return [json.loads(p.read_text("utf-8")) for p in sorted(folder.glob("*.json"))]


def tools_of(fixture: dict[str, Any]) -> list[ToolSpec]:
    return [ToolSpec(t["name"], "", t["parameters"]) for t in fixture["tools"]]


def as_intended(dialect: Dialect, fixture: dict[str, Any]) -> bool:
    parsed = dialect.parse(fixture["output"], tools_of(fixture))
    if fixture["expect"].get("answer"):
        return not parsed.calls
    want = [(c["name"], c["arguments"]) for c in fixture["expect"]["calls"]]
    got = [(c.name, c.arguments) for c in parsed.calls]
    return got == want and not any(c.problem for c in parsed.calls)


_SEED_REGEX = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


def seed_regex_intended(fixture: dict[str, Any]) -> bool:
    """The baseline: seed 002's parser (its one-level regex, ``json.loads``, a ``tool`` key),
    generously also taking ``name`` and ``parameters``."""
    found = []
    for block in _SEED_REGEX.findall(fixture["output"]):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        name = data.get("tool") or data.get("name") if isinstance(data, dict) else None
        if isinstance(name, str):
            found.append((name, data.get("arguments", data.get("parameters", {}))))
    if fixture["expect"].get("answer"):
        return not found
    return found == [(c["name"], c["arguments"]) for c in fixture["expect"]["calls"]]


def throughput(dialect: Dialect, corpus: list[dict[str, Any]], rounds: int, piece: int) -> float:
    """Seconds to parse the corpus ``rounds`` times (``piece`` > 0: streamed in deltas)."""
    jobs = [(f["output"], tools_of(f)) for f in corpus]
    start = _clock()
    for _ in range(rounds):
        for text, tools in jobs:
            if piece <= 0:
                dialect.parse(text, tools)
                continue
            parser = dialect.parser(tools)
            for i in range(0, len(text), piece):
                parser.feed(text[i : i + piece])
            parser.finish()
    return _clock() - start


# -- prompt size --------------------------------------------------------------------------------

_VERBS = ["get", "list", "create", "update", "delete", "search", "send", "fetch", "run", "book"]
_NOUNS = ["weather", "order", "invoice", "ticket", "user", "file", "email", "event", "flight"]


def synthetic_tools(count: int) -> list[ToolSpec]:
    """``count`` realistic tools: descriptions, 2–4 typed parameters, enums, one array."""
    tools = []
    for i in range(count):
        verb, noun = _VERBS[i % len(_VERBS)], _NOUNS[(i // len(_VERBS) + i) % len(_NOUNS)]
        name = f"{verb}_{noun}" if i < len(_VERBS) * len(_NOUNS) else f"{verb}_{noun}_{i}"
        props: dict[str, Any] = {
            f"{noun}_id": {"type": "string", "description": f"The id of the {noun}."},
            "limit": {"type": "integer", "description": "How many results at most."},
        }
        if i % 2 == 0:
            props["status"] = {
                "type": "string",
                "enum": ["open", "closed", "pending"],
                "description": f"Only {noun}s with this status.",
            }
        if i % 3 == 0:
            props["tags"] = {
                "type": "array",
                "items": {"type": "string"},
                "description": "Tags to filter by.",
            }
        tools.append(
            ToolSpec(
                name,
                f"{verb.capitalize()} a {noun} in the company's system and return it as JSON.",
                {"type": "object", "properties": props, "required": [f"{noun}_id"]},
            )
        )
    return tools


def native_json(tools: Sequence[ToolSpec]) -> str:
    return json.dumps([t.to_openai() for t in tools], ensure_ascii=False)


# -- pathological replies ----------------------------------------------------------------------

PATHOLOGICAL_SIZES = (4_000, 16_000, 64_000)


def parse_seconds(dialect: Dialect, text: str, piece: int) -> float:
    start = _clock()
    if piece <= 0:
        dialect.parse(text, LOOPING_TOOLS)
    else:
        parser = dialect.parser(LOOPING_TOOLS)
        for i in range(0, len(text), piece):
            parser.feed(text[i : i + piece])
        parser.finish()
    return _clock() - start


def pathological(max_seconds: float) -> None:
    sizes = "".join(f" {f'{n // 1000} KB':>9}" for n in PATHOLOGICAL_SIZES)
    print(f"{'pathological reply (seconds)':<30} {'dialect':<9} {'parse':<7}{sizes}")
    for label, (unit, name) in LOOPING_REPLIES.items():
        dialect = get_dialect(name)
        for piece, how in ((0, "whole"), (8, "stream")):
            cells = []
            previous = 0.0
            for size in PATHOLOGICAL_SIZES:
                if previous * 16 > max_seconds:
                    cells.append(f" {'skipped':>9}")
                    continue
                try:
                    previous = parse_seconds(dialect, looping_reply(unit, size), piece)
                except Exception as exc:  # a parser bug is a figure of this table too
                    cells.append(f" {type(exc).__name__[:9]:>9}")
                    previous = math.inf
                    continue
                cells.append(f" {previous:>9.3f}")
            print(f"{label:<30} {name:<9} {how:<7}{''.join(cells)}", flush=True)
    print()


# -- before and after -------------------------------------------------------------------------


def measurements(rounds: int, max_seconds: float) -> dict[str, Any]:
    """Corpus accuracy, throughput and pathological times of the toolshim that is imported."""
    corpus = load_corpus()
    out: dict[str, Any] = {"dialects": {}, "pathological": {}}
    for name in available_dialects():
        dialect = get_dialect(name)
        throughput(dialect, corpus, 2, 8)
        out["dialects"][name] = {
            "good": sum(as_intended(dialect, f) for f in corpus),
            "whole": throughput(dialect, corpus, rounds, 0),
            "stream": throughput(dialect, corpus, rounds, 8),
        }
    for label, (unit, name) in LOOPING_REPLIES.items():
        dialect = get_dialect(name)
        for piece, how in ((0, "whole"), (8, "stream")):
            times: list[float | None] = []
            for size in PATHOLOGICAL_SIZES:
                if times and (times[-1] is None or times[-1] * 16 > max_seconds):
                    times.append(None)
                    continue
                times.append(parse_seconds(dialect, looping_reply(unit, size), piece))
            out["pathological"][f"{label}|{name}|{how}"] = times
    out["corpus"] = len(corpus)
    return out


def _measure_in(src: Path, rounds: int, max_seconds: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--emit-json", "--rounds", str(rounds)]
    command += ["--max-seconds", str(max_seconds)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = runs[0]
    for run in runs[1:]:
        for name, row in run["dialects"].items():
            for key in ("whole", "stream"):
                best["dialects"][name][key] = min(best["dialects"][name][key], row[key])
        for key, times in run["pathological"].items():
            best["pathological"][key] = [
                None if a is None or b is None else min(a, b)
                for a, b in zip(best["pathological"][key], times, strict=True)
            ]
    return best


def compare(other_src: Path, rounds: int, repeat: int, max_seconds: float) -> None:
    this_src = ROOT / "src"
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(repeat):
        runs["before"].append(_measure_in(other_src, rounds, max_seconds))
        runs["after"].append(_measure_in(this_src, rounds, max_seconds))
    before, after = _best(runs["before"]), _best(runs["after"])
    corpus = load_corpus()
    size = sum(len(f["output"].encode()) for f in corpus)
    replies = len(corpus) * rounds
    print(f"before: {other_src}\nafter:  {this_src}")
    print(
        f"corpus: {len(corpus)} real model outputs, {size} bytes; {rounds} rounds, best of {repeat}\n"
    )
    print(
        f"{'dialect':<10} {'as intended before':>19} {'after':>9}   "
        f"{'whole r/s before':>16} {'after':>7} {'ratio':>6}   "
        f"{'stream r/s before':>17} {'after':>7} {'ratio':>6}"
    )
    for name, row in after["dialects"].items():
        old = before["dialects"].get(name)
        if old is None:
            continue
        cells = []
        for key in ("whole", "stream"):
            rate_old, rate_new = replies / old[key], replies / row[key]
            cells.append(f"{rate_old:>16.0f} {rate_new:>7.0f} {rate_new / rate_old:>6.2f}")
        good_old = f"{old['good']}/{len(corpus)}"
        good_new = f"{row['good']}/{len(corpus)}"
        print(f"{name:<10} {good_old:>19} {good_new:>9}   {cells[0]}   {' ' + cells[1]}")
    print()
    sizes = "".join(f" {f'{n // 1000} KB':>17}" for n in PATHOLOGICAL_SIZES)
    print(f"{'pathological reply, seconds before/after':<44} {'parse':<7}{sizes}")
    for key, times in after["pathological"].items():
        label, name, how = key.split("|")
        old_times = before["pathological"].get(key, [None] * len(times))
        cells = "".join(
            f" {_seconds(a):>8}/{_seconds(b):<8}" for a, b in zip(old_times, times, strict=True)
        )
        print(f"{label + ' (' + name + ')':<44} {how:<7}{cells}")
    print()


def _seconds(value: float | None) -> str:
    return "skipped" if value is None else f"{value:.3f}"


# -- report -------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="corpus passes per timing (200)")
    parser.add_argument(
        "--pathological", action="store_true", help="print only the pathological-replies table"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="skip a pathological size that could take longer than this (60)",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="OTHER_SRC",
        help="measure another checkout's src/ and this one side by side (see the docstring)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternate runs of --compare (3)")
    parser.add_argument(
        "--corpus",
        type=Path,
        help="read the fixtures from this folder instead of tests/fixtures/corpus",
    )
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.corpus is not None:
        os.environ["TOOLSHIM_BENCH_CORPUS"] = str(args.corpus.resolve())  # subprocesses too
    if args.emit_json:
        print(json.dumps(measurements(args.rounds, args.max_seconds)))
        return 0
    if args.compare is not None:
        compare(args.compare.resolve(), args.rounds, args.repeat, args.max_seconds)
        return 0
    if args.pathological:
        pathological(args.max_seconds)
        return 0
    corpus = load_corpus()
    dialects = available_dialects()
    size = sum(len(f["output"].encode()) for f in corpus)
    print(f"corpus: {len(corpus)} real model outputs, {size} bytes; {args.rounds} rounds\n")

    print(
        f"{'dialect':<10} {'as intended':>12} {'whole r/s':>10} {'whole MB/s':>11} "
        f"{'stream r/s':>11} {'stream MB/s':>12}"
    )
    for name in dialects:
        dialect = get_dialect(name)
        good = sum(as_intended(dialect, f) for f in corpus)
        throughput(dialect, corpus, 2, 8)  # warm caches before timing
        whole = throughput(dialect, corpus, args.rounds, 0)
        stream = throughput(dialect, corpus, args.rounds, 8)
        replies = len(corpus) * args.rounds
        megabytes = size * args.rounds / 1e6
        print(
            f"{name:<10} {good:>5}/{len(corpus):<3} {100 * good / len(corpus):>3.0f}% "
            f"{replies / whole:>10.0f} {megabytes / whole:>11.2f} "
            f"{replies / stream:>11.0f} {megabytes / stream:>12.2f}"
        )
    seed = sum(seed_regex_intended(f) for f in corpus)
    print(f"{'seed regex':<10} {seed:>5}/{len(corpus):<3} {100 * seed / len(corpus):>3.0f}%")
    print()

    count_tokens = load_o200k()
    sizes = [1, 10, 50]
    columns = "".join(f" {f'{n} tool' + ('s' if n > 1 else ''):>18}" for n in sizes)
    print(f"{'prompt (chars / o200k tokens)':<30}{columns}")
    rows: list[tuple[str, Dialect | None]] = [("native OpenAI JSON", None)]
    rows += [(name, get_dialect(name)) for name in dialects]
    for label, shown in rows:
        cells = []
        for n in sizes:
            tools = synthetic_tools(n)
            text = native_json(tools) if shown is None else shown.render_tools(tools, AUTO)
            tokens = f"{count_tokens(text)}" if count_tokens else "-"
            cells.append(f" {f'{len(text)} / {tokens}':>18}")
        print(f"{label:<30}{''.join(cells)}")
    print()
    pathological(args.max_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
