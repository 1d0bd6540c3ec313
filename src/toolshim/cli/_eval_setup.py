"""What ``toolshim eval`` sets up for either suite: the configurations, the upstream or the
embedded model, and a SIGTERM that stops a run the way Ctrl-C does."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from toolshim.capabilities.registry import Registry
from toolshim.cli._common import embedded_model
from toolshim.errors import ConfigError
from toolshim.evaluation import BASELINES, EvalConfig
from toolshim.upstreams.openai_http import OpenAIUpstream

__all__ = ["build_configs", "first_model", "machine", "sigterm_as_interrupt", "upstream_for_eval"]

err_console = Console(stderr=True)


def build_configs(
    modes: list[str],
    dialects: list[str],
    strategies: list[str],
    specs: list[str],
    baselines: list[str],
) -> list[EvalConfig]:
    """The configurations to run: the baselines first, then ``--config``, then the product of
    ``--mode`` × ``--dialect`` × ``--strategy``."""
    configs: list[EvalConfig] = []
    for name in baselines:
        if name.lower() == "none":
            continue
        if name.lower() not in BASELINES:
            raise ConfigError(
                f"unknown baseline {name!r}; available: {', '.join(BASELINES)}, none",
                param="baseline",
            )
        configs.append(EvalConfig(kind=name.lower()))  # type: ignore[arg-type]
    configs += [EvalConfig.parse(spec) for spec in specs]
    if modes or dialects or strategies:
        for mode in modes or ["auto"]:
            for dialect in dialects or [""]:
                for strategy in strategies or [""]:
                    configs.append(EvalConfig.toolshim(mode, dialect or None, strategy or None))
    if not [c for c in configs if c.kind == "toolshim"]:
        configs.append(EvalConfig.toolshim("auto"))
    return list(dict.fromkeys(configs))


@contextlib.contextmanager
def upstream_for_eval(
    url: str | None,
    model_file: Path | None,
    local_model: str | None,
    ctx_size: int | None,
    threads: int | None,
    parallel: int = 1,
) -> Iterator[tuple[str, str | None, dict[str, Any], Callable[[Registry], object] | None]]:
    """Yield (base URL, model name or None, description, the recorder of the upstream's own
    facts or None); start the embedded model if asked, with ``ctx_size`` a slot (None: what
    the model was trained for)."""
    if url and (model_file or local_model):
        raise ConfigError("give either --upstream or --model-file/--local-model, not both")
    if url:
        yield url, None, {"upstream": url}, None
        return
    try:
        from toolshim.local import EmbeddedServer
    except ImportError as exc:
        raise ConfigError(
            f"no --upstream given and the embedded model is unavailable ({exc}); pass "
            "--upstream URL or pip install 'toolshim[local]'",
            param="upstream",
        ) from exc
    if model_file is not None and not model_file.is_file():
        raise ConfigError(f"model file {str(model_file)!r} does not exist", param="model-file")
    path, ctx_size = embedded_model(model_file, local_model, ctx_size)
    # Each of the ``parallel`` request slots gets ``ctx_size`` of context.
    server = EmbeddedServer(path, ctx_size=ctx_size * parallel, threads=threads, parallel=parallel)
    err_console.print(
        f"Starting the embedded model {path.name} (ctx {ctx_size}, {parallel} slot(s)) …"
    )
    server.start()
    try:
        yield (
            server.base_url,
            server.model,
            {
                "upstream": "embedded",
                "upstream_key": server.key,
                "model_file": path.name,
                "ctx_size": ctx_size,
                "threads": threads,
                "slots": parallel,
            },
            server.record_capabilities,
        )
    finally:
        server.stop()


async def first_model(upstream: OpenAIUpstream) -> str:
    listing = await upstream.list_models()
    models = [str(m.get("id")) for m in listing.get("data") or [] if m.get("id")]
    if not models:
        raise ConfigError("the upstream lists no model; pass --model NAME", param="model")
    return models[0]


def machine() -> str:
    """The processor and the cores this process may use, e.g. for the results page."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.partition(":")[2].strip()
                break
    return f"{cpu}, {cores} cores, {platform.system()}"


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """A run in the background ignores SIGINT: let SIGTERM stop it the same way, so that the
    report is written and the embedded model stopped on the way out."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
