"""The child process that runs llama.cpp's own HTTP server in-process (xllamacpp) for one GGUF.

``python -m toolshim.local.launcher --model PATH.gguf`` loads the model, serves the OpenAI API
on ``--host``/``--port`` (port 0: a free port), writes ``{"base_url", "pid", "model"}`` to
``--ready-file`` once the model is loaded, and runs until SIGTERM/SIGINT or until its parent
process is gone. :class:`toolshim.local.server.EmbeddedServer` starts it; it is also handy by
hand. Exit codes: 0 stopped, 1 llama.cpp failed to start, 2 bad arguments, 3 xllamacpp
missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = [
    "ServerFactory",
    "build_parser",
    "default_threads",
    "llama_server",
    "main",
    "parse_args",
    "server_params",
    "tune_openmp",
]

EXIT_STOPPED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_XLLAMACPP = 3

_PR_SET_PDEATHSIG = 1

DEFAULT_TEMPERATURE = 0.0
"""The temperature of a request that sends none. llama.cpp's own default (0.8) samples: the
0.5B then answered "1234 times 5678" wrong on 2 of 5 chat runs whose calls were right, and
every figure in docs/results.md is measured at 0."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolshim.local.launcher",
        description=(
            "Serve one GGUF model with llama.cpp's own OpenAI-compatible HTTP server "
            "(via xllamacpp), in this process, until SIGTERM or until the parent process "
            "exits. toolshim starts it for `toolshim serve` with the embedded model."
        ),
        epilog=(
            "OpenMP threads block while they wait (OMP_WAIT_POLICY=PASSIVE) unless "
            "OMP_WAIT_POLICY or GOMP_SPINCOUNT is set: spinning starves shared CPUs."
        ),
    )
    parser.add_argument("--model", required=True, type=Path, help="path of the .gguf file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on [127.0.0.1]")
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on; 0 picks a free one [0]"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for generation [all cores]"
    )
    parser.add_argument(
        "--ctx-size", type=int, default=8192, help="context window in tokens [8192]"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="concurrent request slots (they share the context) [1]",
    )
    parser.add_argument("--alias", default=None, help="model name served in /v1/models [file name]")
    parser.add_argument(
        "--temperature",
        type=float,
        default=DEFAULT_TEMPERATURE,
        help="sampling temperature of a request that sends none; a request's own wins "
        "[0: greedy, the temperature toolshim's published accuracy was measured at; "
        "llama.cpp's own default is 0.8]",
    )
    parser.add_argument(
        "--no-jinja",
        dest="jinja",
        action="store_false",
        help="use llama.cpp's built-in templates instead of the GGUF's jinja chat template "
        "(then requests with `tools` are rejected)",
    )
    parser.add_argument(
        "--ready-file", type=Path, default=None, help="write the server's address here once ready"
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="exit when this process is gone [the parent at start]",
    )
    parser.add_argument(
        "--kill-with-parent",
        action="store_true",
        help="(Linux) let the kernel SIGKILL this process the moment the thread that started "
        "it exits; only safe when that is the parent's main thread",
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the arguments (exits with status 2 and a one-line error when bad)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.model.is_file():
        parser.error(f"model file {str(args.model)!r} does not exist")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port} is not between 0 and 65535")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads {args.threads} must be at least 1")
    if args.ctx_size < 64:
        parser.error(f"--ctx-size {args.ctx_size} is too small (at least 64)")
    if args.parallel < 1:
        parser.error(f"--parallel {args.parallel} must be at least 1")
    if not 0 <= args.temperature <= 2:  # also false for nan
        parser.error(f"--temperature {args.temperature} is not between 0 and 2")
    if args.threads is None:
        args.threads = default_threads()
    if args.alias is None:
        args.alias = args.model.name
    if args.parent_pid is None:
        args.parent_pid = os.getppid()
    return args


def default_threads() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def server_params(args: argparse.Namespace) -> Any:
    """The xllamacpp ``CommonParams`` for ``args``."""
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.model_alias = {args.alias}
    params.sampling.temp = args.temperature
    params.use_jinja = args.jinja
    params.ui = False
    params.endpoint_metrics = True
    params.cache_ram_mib = 1024  # prompt cache for prefix reuse; the default 8 GiB is a lot
    return params


def tune_openmp(environ: MutableMapping[str, str]) -> None:
    """Make llama.cpp's OpenMP threads block instead of spin while they wait, unless the user
    chose a policy. On a shared 2-core machine (the proxy, the client and other processes
    beside the model) spinning threads starve each other: measured here under load, output
    went from 0.8 to 6.6 tok/s and prompt processing from 14 to 37 tok/s with PASSIVE."""
    if "OMP_WAIT_POLICY" not in environ and "GOMP_SPINCOUNT" not in environ:
        environ["OMP_WAIT_POLICY"] = "PASSIVE"


def _watch_parent(parent_pid: int, stop: threading.Event) -> None:
    """Ask to be signalled when the parent dies (Linux), and poll for it everywhere."""
    while not stop.wait(0.5):
        if os.getppid() != parent_pid:
            print(f"launcher: parent process {parent_pid} is gone, stopping", flush=True)
            os._exit(EXIT_STOPPED)


def _set_death_signal(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        print(f"launcher: prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}", flush=True)


def _write_ready(path: Path, info: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(info, out)
    os.replace(tmp, path)


ServerFactory = Callable[[argparse.Namespace], Any]
"""Builds the running server from the arguments; the result has ``listening_address``."""


def llama_server(args: argparse.Namespace) -> Any:
    """llama.cpp's own HTTP server (xllamacpp), loaded and listening when this returns."""
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return xllamacpp.Server(server_params(args))


def main(argv: Sequence[str] | None = None, *, server_factory: ServerFactory | None = None) -> int:
    """Run the launcher; ``server_factory`` replaces llama.cpp (tests serve a tiny fake)."""
    args = parse_args(argv)
    stop = threading.Event()
    if args.kill_with_parent:
        _set_death_signal(signal.SIGKILL)
    if os.getppid() != args.parent_pid:
        print(f"launcher: parent process {args.parent_pid} is already gone", flush=True)
        return EXIT_STOPPED
    # A watcher thread: exits even while the main thread is inside llama.cpp loading the model.
    threading.Thread(target=_watch_parent, args=(args.parent_pid, stop), daemon=True).start()

    loading = True

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if loading:  # nothing to shut down cleanly yet
            os._exit(EXIT_STOPPED)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    if server_factory is None:
        if importlib.util.find_spec("xllamacpp") is None:
            print(
                "launcher: xllamacpp is not installed; install it with: "
                "pip install 'toolshim[local]'",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_NO_XLLAMACPP
        server_factory = llama_server
    tune_openmp(os.environ)  # before libgomp is loaded with xllamacpp
    print(
        f"launcher: loading {args.model} (ctx {args.ctx_size}, {args.threads} threads, "
        f"jinja {'on' if args.jinja else 'off'})",
        flush=True,
    )
    try:
        server = server_factory(args)
    except RuntimeError as exc:
        print(f"launcher: llama.cpp did not start: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    loading = False
    base_url = f"{server.listening_address}/v1"
    print(f"launcher: serving {args.alias!r} at {base_url} (pid {os.getpid()})", flush=True)
    if args.ready_file is not None:
        _write_ready(
            args.ready_file, {"base_url": base_url, "pid": os.getpid(), "model": args.alias}
        )
    while not stop.wait(1.0):
        pass
    print("launcher: stopping", flush=True)
    del server  # ~Server stops llama.cpp's HTTP and main loops
    return EXIT_STOPPED


if __name__ == "__main__":
    sys.exit(main())
