"""``toolshim eval --suite coding``: Claude Code and Codex CLI on real small tasks, through
toolshim and straight to the model server, judged on the folder each leaves behind."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolshim.capabilities.registry import Registry
from toolshim.cli._eval_setup import err_console, machine, sigterm_as_interrupt, upstream_for_eval
from toolshim.cli._eval_suite import Options
from toolshim.errors import ConfigError
from toolshim.evaluation.coding_clients import get_client
from toolshim.evaluation.coding_runner import (
    CodingRecord,
    CodingRunner,
    ServedThread,
    summarize_coding,
)
from toolshim.evaluation.coding_tasks import load_coding_tasks
from toolshim.evaluation.recorder import Recorder
from toolshim.testing.server import serve_app

__all__ = ["coding_markdown", "run_coding_suite"]

out_console = Console()
ROUTES = ("toolshim", "native")


def run_coding_suite(
    options: Options,
    *,
    clients: list[str],
    routes: list[str],
    task_ids: list[str],
    budget: float,
    max_turns: int,
    keep: Path | None,
    serve_options: dict[str, Any],
) -> None:
    """Run the suite on the upstream of ``options`` (its ``limit`` tasks, 0: all) and write the
    report at its ``output`` (see the module docstring)."""
    chosen = [get_client(c) for c in (clients or ["claude", "codex"])]
    for route in routes:
        if route not in ROUTES:
            raise ConfigError(f"unknown route {route!r}; use toolshim or native", param="baseline")
    tasks = load_coding_tasks(task_ids or None, options.limit or None)
    previous = (
        _load(options.output)
        if (options.resume or options.report_only) and options.output.exists()
        else {}
    )
    records: dict[tuple[str, str, str], CodingRecord] = {
        r.key: r for r in (CodingRecord.from_dict(d) for d in previous.get("records", []))
    }
    meta: dict[str, Any] = dict(previous.get("meta") or {})
    if options.report_only:
        _show(list(records.values()), options.markdown)
        return
    todo = [
        (client, route, task)
        for client in chosen
        for route in routes
        for task in tasks
        if (client.name, route, task.id) not in records
    ]
    if not todo:
        err_console.print("Nothing to run: every task is in the report already (--resume).")
        _show(list(records.values()), options.markdown)
        return
    for client in chosen:
        err_console.print(f"[dim]{client.package}@{client.version}: {client.install()}[/]")
    from toolshim.cli.serve import EMBEDDED_OFFER

    if options.upstream is None:  # as `toolshim serve` serves the embedded model
        serve_options = {"offer_tools": EMBEDDED_OFFER, **serve_options}

    with ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        if keep is not None:
            _log_to(keep / "toolshim.log", stack)
        base_url, model, described, record_facts = stack.enter_context(
            upstream_for_eval(
                options.upstream,
                options.model_file,
                options.local_model,
                options.ctx_size,
                options.threads,
            )
        )
        context = described.get("ctx_size", options.ctx_size)
        root = base_url.rstrip("/").removesuffix("/v1")
        back = Recorder(root, transcript=keep / "upstream.jsonl" if keep is not None else None)
        back_server = stack.enter_context(serve_app(back.app()))
        proxy_front: Recorder | None = None
        proxy_url = ""
        if "toolshim" in routes:
            app = _proxy(
                f"http://127.0.0.1:{back_server.port}/v1",
                str(described.get("upstream_key") or base_url),
                model,
                context,
                record_facts,
                serve_options,
                stack,
            )
            proxy = stack.enter_context(ServedThread(app))
            proxy_front = Recorder(proxy.url)
            proxy_url = f"http://127.0.0.1:{stack.enter_context(serve_app(proxy_front.app())).port}"
        meta.update(
            {
                "suite": "coding",
                "machine": machine(),
                "model": model or described.get("upstream"),
                "ctx_size": context,
                "budget": budget,
                "max_turns": max_turns,
                "serve_options": serve_options,
                "clients": {c.name: c.version for c in chosen},
                "date": dt.date.today().isoformat(),
                **{k: v for k, v in described.items() if k in ("model_file", "upstream")},
            }
        )
        try:
            for number, (client, route, task) in enumerate(todo, 1):
                if route == "toolshim":
                    assert proxy_front is not None
                    front, url = proxy_front, proxy_url
                else:
                    front, url = back, f"http://127.0.0.1:{back_server.port}"
                runner = CodingRunner(
                    client,
                    route,  # type: ignore[arg-type]
                    url,
                    model or "local",
                    front,
                    back,
                    budget=budget,
                    max_turns=max_turns,
                    keep=keep,
                )
                err_console.print(
                    f"[{number}/{len(todo)}] {client.name} via {route}: {task.id} …", end=" "
                )
                record = runner.run(task)
                records[record.key] = record
                err_console.print(_line(record), highlight=False)
                _save(options.output, meta, list(records.values()))
        except KeyboardInterrupt:
            err_console.print("\ninterrupted: the report holds what finished (--resume goes on)")
    _show(list(records.values()), options.markdown)


def _proxy(
    upstream_url: str,
    key: str,
    model: str | None,
    context: int | None,
    record_facts: Any,
    options: dict[str, Any],
    stack: ExitStack,
) -> Any:
    """toolshim's proxy as ``toolshim serve`` builds it for this model, over ``upstream_url``."""
    from toolshim.cli._common import UpstreamTarget
    from toolshim.engine import Engine
    from toolshim.server import create_app
    from toolshim.upstreams.aiohttp_upstream import AiohttpUpstream

    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolshim-coding-")))
    registry = Registry.open(folder / "capabilities.sqlite3")
    stack.callback(registry.close)
    if record_facts is not None:
        record_facts(registry)
    target = UpstreamTarget(upstream_url, key, model, context)
    client = AiohttpUpstream(upstream_url, key=key, timeout=3600.0, total_timeout=7200.0)
    engine = Engine(client, registry=registry, **options)
    return create_app(
        engine,
        default_model=model,
        pin_model=model is not None,
        context_hint=target.context_hint,
    )


def _log_to(path: Path, stack: ExitStack) -> None:
    """toolshim's debug log (what went upstream, the model's raw text) into ``path``."""
    import logging

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("toolshim")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    stack.callback(logger.setLevel, previous)
    stack.callback(logger.removeHandler, handler)
    stack.callback(handler.close)


def _line(record: CodingRecord) -> str:
    verdict = "[green]pass[/]" if record.passed else f"[red]fail[/] ({record.failure})"
    reuse = (
        f", cache {record.later_cached_tokens}/{record.later_prompt_tokens}"
        if record.later_prompt_tokens
        else ""
    )
    why = "" if record.passed else f" — {record.reason[:100]}"
    return (
        f"{verdict} {record.seconds:.0f} s, {record.client_turns} turns, "
        f"{record.llm_calls} LLM calls{reuse}{why}"
    )


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the report {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict) or data.get("meta", {}).get("suite") != "coding":
        raise ConfigError(f"{str(path)!r} is not a coding-suite report")
    return data


def _save(path: Path, meta: dict[str, Any], records: list[CodingRecord]) -> None:
    data = {
        "meta": meta,
        "summary": summarize_coding(records),
        "records": [r.as_dict() for r in records],
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _show(records: list[CodingRecord], markdown: bool) -> None:
    rows = summarize_coding(records)
    table = Table(title="coding-agent suite")
    for column in ("client", "route", "passed", "median s", "LLM calls", "cache reuse", "failures"):
        table.add_column(column)
    for row in rows:
        table.add_row(*_cells(row))
    out_console.print(table)
    if markdown:
        out_console.print(coding_markdown(records), markup=False, highlight=False)


def _cells(row: dict[str, Any]) -> list[str]:
    reuse = row["later_cache_reuse"]
    failures = ", ".join(f"{k} {v}" for k, v in sorted(row["failures"].items())) or "-"
    return [
        row["client"],
        row["route"],
        f"{row['passed']}/{row['tasks']}",
        f"{row['median_seconds']:.0f}",
        str(row["llm_calls"]),
        "-" if reuse is None else f"{reuse:.0%}",
        failures,
    ]


def coding_markdown(records: list[CodingRecord]) -> str:
    """The summary and per-task tables as Markdown (for docs/results.md)."""
    lines = [
        "| client | route | passed | median s | LLM calls | cache reuse (turn 2 on) | failures |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in summarize_coding(records)]
    lines += [
        "",
        "| client | route | task | pass | s | turns | LLM calls | prompt / cached tokens | why |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in sorted(records, key=lambda r: (r.client, r.route, r.task)):
        why = "" if r.passed else f"{r.failure}: {r.reason[:80]}".replace("|", "/")
        lines.append(
            f"| {r.client} | {r.route} | {r.task} | {'yes' if r.passed else 'no'} | "
            f"{r.seconds:.0f} | {r.client_turns} | {r.llm_calls} | "
            f"{r.prompt_tokens} / {r.cached_tokens} | {why} |"
        )
    return "\n".join(lines)
