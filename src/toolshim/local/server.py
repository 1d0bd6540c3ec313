"""EmbeddedServer: llama.cpp (xllamacpp) serving a GGUF as a managed child process on 127.0.0.1.

The child is ``python -m toolshim.local.launcher``; it listens on a free port (or the one
given), and it does not outlive its parent: the kernel kills it when the parent dies (Linux,
when started from the main thread) and it polls for its parent everywhere. ``start()`` waits
for the ready file and ``/health``; a failure raises LocalModelError quoting the child's log.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from toolshim.errors import LocalModelError
from toolshim.local.model import KNOWN_MODELS, KnownModel

if TYPE_CHECKING:
    from toolshim.capabilities.registry import Registry

__all__ = ["EMBEDDED_KEY_PREFIX", "EmbeddedServer", "running_servers"]

EMBEDDED_KEY_PREFIX = "embedded://"
"""How the registry keys of embedded models begin: ``embedded://<model file name>``."""
log = logging.getLogger("toolshim.local")

_RUNNING: set[EmbeddedServer] = set()
"""Started and not yet stopped (held strongly, so that exit always stops them)."""
_LOG_TAIL_LINES = 15
_LAUNCHER = ("-m", "toolshim.local.launcher")


class EmbeddedServer:
    """A llama.cpp server for one GGUF file, as a child process (a context manager).

    >>> with EmbeddedServer(ensure_default_model()) as server:      # doctest: +SKIP
    ...     server.record_capabilities(registry)
    ...     upstream = OpenAIUpstream(server.base_url, key=server.key)
    ...     engine = Engine(upstream, mode="auto", registry=registry)

    ``port=None`` picks a free port; ``threads=None`` uses every core this process may use;
    ``alias`` is the model name served in ``/v1/models`` (default: the known model's alias, else
    the file name). ``log_path`` keeps llama.cpp's log (default: a temporary file, removed by
    a clean ``stop()``). ``parallel`` request slots share ``ctx_size``. ``jinja=False`` uses
    llama.cpp's built-in templates, which reject ``tools`` (as ``llama-server`` without
    ``--jinja`` does). ``temperature`` is the sampling temperature of a request that sends none
    (default: the launcher's, 0, greedy). ``launcher`` is the command that runs the launcher
    (default ``python -m toolshim.local.launcher``); its arguments are appended.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        host: str = "127.0.0.1",
        port: int | None = None,
        threads: int | None = None,
        ctx_size: int = 8192,
        alias: str | None = None,
        startup_timeout: float = 180.0,
        log_path: str | os.PathLike[str] | None = None,
        *,
        parallel: int = 1,
        jinja: bool = True,
        temperature: float | None = None,
        launcher: Sequence[str] | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.host = host
        self.port = port
        self.threads = threads
        self.ctx_size = ctx_size
        self.known: KnownModel | None = _known_by_filename(self.model_path)
        self.alias = alias or (self.known.alias if self.known else self.model_path.name)
        self.startup_timeout = startup_timeout
        self.parallel = parallel
        self.jinja = jinja
        self.temperature = temperature
        self.launcher = list(launcher) if launcher else [sys.executable, *_LAUNCHER]
        self._log_path = Path(log_path) if log_path is not None else None
        self._own_log = False
        self._process: subprocess.Popen[bytes] | None = None
        self._base_url: str | None = None
        self._model: str | None = None
        self._props: dict[str, Any] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        state = self._base_url or ("starting" if self._process else "stopped")
        return f"EmbeddedServer({str(self.model_path)!r}, {state})"

    # -- state ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (only once started)."""
        if self._base_url is None:
            raise LocalModelError(f"{self!r} is not started; call start() first")
        return self._base_url

    @property
    def model(self) -> str:
        """The model name ``/v1/models`` reports (the alias)."""
        return self._model or self.alias

    @property
    def key(self) -> str:
        """``embedded://<file name>``: where this model's facts live in the capability registry.

        Stable across runs (the port changes each time), so pass it as the upstream's key:
        ``OpenAIUpstream(server.base_url, key=server.key)``.
        """
        return f"{EMBEDDED_KEY_PREFIX}{self.model_path.name}"

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def command(self, ready_file: Path, *, kill_with_parent: bool = False) -> list[str]:
        """The launcher command line for this server."""
        cmd = [*self.launcher, "--model", str(self.model_path)]
        cmd += ["--host", self.host, "--port", str(self.port or 0)]
        cmd += ["--ctx-size", str(self.ctx_size), "--alias", self.alias]
        cmd += ["--parallel", str(self.parallel), "--ready-file", str(ready_file)]
        cmd += ["--parent-pid", str(os.getpid())]
        if self.threads is not None:
            cmd += ["--threads", str(self.threads)]
        if self.temperature is not None:
            cmd += ["--temperature", str(self.temperature)]
        if not self.jinja:
            cmd.append("--no-jinja")
        if kill_with_parent:
            cmd.append("--kill-with-parent")
        return cmd

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> EmbeddedServer:
        """Start the child and wait until it answers ``/health``; idempotent while running."""
        with self._lock:
            if self.running and self._base_url:
                return self
            if not self.model_path.is_file():
                raise LocalModelError(
                    f"model file {str(self.model_path)!r} does not exist; assemble the default "
                    "model with toolshim.local.ensure_default_model() or pass a .gguf path"
                )
            if self.launcher[1:] == list(_LAUNCHER) and not _has_xllamacpp():
                raise LocalModelError(
                    "the embedded model needs xllamacpp (llama.cpp's server for Python): "
                    "pip install 'toolshim[local]'"
                )
            self._start_locked()
        return self

    async def astart(self) -> EmbeddedServer:
        """:meth:`start` in a worker thread."""
        return await asyncio.to_thread(self.start)

    def _start_locked(self) -> None:
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="toolshim-llama-", suffix=".log")
            os.close(fd)
            self._log_path, self._own_log = Path(name), True
        ready_dir = Path(tempfile.mkdtemp(prefix="toolshim-launch-"))
        ready_file = ready_dir / "ready.json"
        # PR_SET_PDEATHSIG fires when the *thread* that spawned the child exits: only ask for
        # it from the main thread; from other threads the launcher's parent polling does it.
        main_thread = threading.current_thread() is threading.main_thread()
        cmd = self.command(ready_file, kill_with_parent=main_thread)
        try:
            with open(self._log_path, "ab") as log:
                self._process = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C reaches us, and we stop the child
                )
        except OSError as exc:
            raise LocalModelError(f"could not start the llama.cpp launcher: {exc}") from exc
        _RUNNING.add(self)
        try:
            info = self._wait_ready(ready_file)
            self._base_url = str(info["base_url"])
            self._model, self._props = self._describe()
        except BaseException:
            self.stop(grace=3.0)
            raise
        finally:
            with contextlib.suppress(OSError):
                ready_file.unlink(missing_ok=True)
                ready_dir.rmdir()

    def _wait_ready(self, ready_file: Path) -> dict[str, Any]:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        info: dict[str, Any] | None = None
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                code = self._process.poll()
                if code is not None:
                    raise LocalModelError(
                        f"llama.cpp exited with status {code} while starting "
                        f"{self.model_path.name}:\n{self.log_tail()}"
                    )
                if info is None and ready_file.is_file():
                    info = json.loads(ready_file.read_text("utf-8"))
                if info is not None and _healthy(client, str(info["base_url"])):
                    return info
                time.sleep(0.1)
        raise LocalModelError(
            f"llama.cpp did not become ready within {self.startup_timeout:.0f}s for "
            f"{self.model_path.name}:\n{self.log_tail()}"
        )

    def _describe(self) -> tuple[str, dict[str, Any]]:
        """The served model name (``/v1/models``) and llama.cpp's ``/props``."""
        root = self.base_url.removesuffix("/v1")
        with httpx.Client(timeout=10.0) as client:
            try:
                models = client.get(f"{self.base_url}/models").json()
                props = client.get(f"{root}/props").json()
            except (httpx.HTTPError, ValueError) as exc:
                raise LocalModelError(
                    f"llama.cpp at {self.base_url} answered /health but not /models or /props: {exc!r}"
                ) from exc
        data = models.get("data") or [{}]
        return str(data[0].get("id") or self.alias), props if isinstance(props, dict) else {}

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``grace`` seconds); idempotent."""
        with self._lock:
            process, self._process = self._process, None
            self._base_url = None
            _RUNNING.discard(self)
            if process is None:
                return
            clean = _terminate(process, grace)
            if clean and self._own_log and self._log_path is not None:
                with contextlib.suppress(OSError):
                    self._log_path.unlink()
                self._log_path, self._own_log = None, False

    async def astop(self, grace: float = 10.0) -> None:
        """:meth:`stop` in a worker thread."""
        await asyncio.to_thread(self.stop, grace)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedServer:
        return await self.astart()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    # -- what the server is -----------------------------------------------------------------

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines of llama.cpp's log (errors included), for error messages."""
        if self._log_path is None:
            return "(no log)"
        try:
            text = self._log_path.read_text("utf-8", errors="replace")
        except OSError as exc:
            return f"(log {self._log_path} unreadable: {exc})"
        tail = text.splitlines()[-lines:]
        return "\n".join(f"  | {line}" for line in tail) + f"\n  (full log: {self._log_path})"

    def capabilities(self) -> dict[str, str]:
        """Facts about this upstream for the capability registry, from measurements.

        * ``native_tools``: ``no`` when llama.cpp rejects ``tools`` (jinja off) or the chat
          template has no tools, and for the known Qwen models, which answer a native
          ``tools`` request with the call as fenced JSON in ``content``, never with
          ``tool_calls``; ``yes`` for another template with tools.
        * ``tool_choice``: ``no``: with ``tool_choice: "required"`` the Qwen models still
          answer in content (and ramble until ``max_tokens``), nothing enforces it.
        * ``structured_output``: ``yes``: llama.cpp enforces a ``json_schema`` response_format
          (LLGuidance), measured on this build.
        * ``prefill``: ``yes``: a request that ends with an assistant message gets that
          message continued (and returned with it), measured on this build; emulation uses it
          to ask for more calls (:mod:`toolshim.engine.more_calls`).
        * ``parallel_calls``: from the chat template's capabilities, where tools are native.
        * ``dialect``: the dialect measured best for a known model (``hermes`` for Qwen);
          absent for an unknown GGUF.
        * ``context_window``: tokens per request slot.
        """
        caps = self._props.get("chat_template_caps") or {}
        template_tools = bool(caps.get("supports_tools")) and bool(self._props.get("chat_template"))
        if self.known is not None and not self.known.chat_template:
            template_tools = False
        native = self.jinja and template_tools
        if self.known is not None and self.known.tool_calls_in_content:
            native = False
        facts = {
            "native_tools": "yes" if native else "no",
            "tool_choice": "no" if not native or self.known is not None else "unknown",
            "structured_output": "yes",
            "prefill": "yes",
            "parallel_calls": "yes"
            if native and caps.get("supports_parallel_tool_calls")
            else "unknown",
            "context_window": str(self.ctx_size // max(1, self.parallel)),
        }
        if self.known is not None and self.known.dialect:
            facts["dialect"] = self.known.dialect

        return facts

    def record_capabilities(self, registry: Registry) -> dict[str, str]:
        """Store :meth:`capabilities` in ``registry`` under :attr:`key` (source ``upstream``),
        and for a known model the configuration its own eval picked (``dialect``,
        ``strategy``, ``constrain``, ``doubt``; source ``eval``, from
        ``toolshim/data/eval_picks.json``) unless a pick of the user's own ``toolshim eval --apply`` is stored there; return what
        was stored. A preferred dialect this toolshim lacks is left out, with a warning."""
        from toolshim.capabilities.facts import Source
        from toolshim.capabilities.shipped_picks import SHIPPED_PREFIX, shipped_eval_facts

        stored: dict[str, str] = {}
        detail = f"embedded llama.cpp server ({self.model_path.name})"
        for name, value in self.capabilities().items():
            if _usable(name, value):
                registry.learn(self.key, self.model, name, value, Source.UPSTREAM, detail=detail)
                stored[name] = value
        picked = shipped_eval_facts(self.known.name) if self.known is not None else {}
        evidence = registry.evidence(self.key, self.model)
        for name, fact in picked.items():
            own = [
                e
                for e in evidence.get(name, ())
                if e.fact.source is Source.EVAL and not e.fact.detail.startswith(SHIPPED_PREFIX)
            ]
            if not own and _usable(name, fact.value):
                registry.learn(self.key, self.model, name, fact.value, Source.EVAL, fact.detail)
                stored[name] = str(fact.value)
        return stored

    @property
    def props(self) -> dict[str, Any]:
        """llama.cpp's ``/props`` as read at start (chat template, its capabilities, …)."""
        return dict(self._props)


def _usable(name: str, value: object) -> bool:
    """False (with a warning) for a preferred dialect this toolshim lacks."""
    from toolshim.capabilities.known import lacked_dialect

    lacked = lacked_dialect(value) if name == "dialect" else None
    if lacked is None:
        return True
    log.warning("the embedded model prefers %s", lacked)
    return False


def _has_xllamacpp() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def _known_by_filename(path: Path) -> KnownModel | None:
    return next((m for m in KNOWN_MODELS.values() if m.filename == path.name), None)


def _healthy(client: httpx.Client, base_url: str) -> bool:
    try:
        response = client.get(f"{base_url.removesuffix('/v1')}/health")
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def _terminate(process: subprocess.Popen[bytes], grace: float) -> bool:
    """SIGTERM, wait, SIGKILL; True when the child stopped on SIGTERM."""
    if process.poll() is not None:
        return process.returncode == 0
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
        return True
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()
        return False


@atexit.register
def _stop_all() -> None:
    """Stop every server this process started and forgot to stop."""
    for server in list(_RUNNING):
        server.stop(grace=5.0)


def running_servers() -> Sequence[EmbeddedServer]:
    """The servers this process has started and not stopped."""
    return list(_RUNNING)
