"""Fixtures for the BFCL evaluation tests: BFCL's scratch folders in a temp dir, and an oracle model."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolshim.evaluation.bfcl import BfclCase

# BFCL creates result/, score/ and lock folders where BFCL_PROJECT_ROOT points, when it is
# first imported — which happens while the test modules are collected, before any fixture.
os.environ.setdefault(
    "BFCL_PROJECT_ROOT", str(Path(tempfile.gettempdir()) / "toolshim-tests-bfcl-root")
)


def oracle_calls(case: BfclCase, *, underscores: bool) -> list[tuple[str, dict[str, Any]]]:
    """The first possible answer of every ground-truth call (optional-only params left out)."""
    calls = []
    for entry in case.ground_truth or ():
        ((name, params),) = entry.items()
        arguments = {}
        for param, options in params.items():
            chosen = next((o for o in options if o != ""), None)
            if chosen is not None:
                arguments[param] = chosen
        calls.append((re.sub(r"\.", "_", name) if underscores else name, arguments))
    return calls


def question(body: Mapping[str, Any]) -> str:
    """The last user message of a request body."""
    return str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])


def python_call(name: str, arguments: Mapping[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"


class OracleModel:
    """A scripted "model" that answers every BFCL case right, in the shape each caller asked for.

    Native requests (with ``tools``) get the calls as fenced JSON in ``content`` — what
    Qwen behind llama-server does — unless ``native_tool_calls``; BFCL's prompt gets Python
    calls; toolshim's emulation prompts get ``{"tool_calls": [...]}`` (every dialect reads it).
    Irrelevance cases get a plain answer.
    """

    def __init__(self, cases: list[BfclCase], *, native_tool_calls: bool = False) -> None:
        self.by_question = {str(c.messages[-1]["content"]): c for c in cases}
        self.native_tool_calls = native_tool_calls

    def __call__(self, body: dict[str, Any]) -> Any:
        from toolshim.testing import Reply, call

        case = self.by_question.get(question(body))
        system = " ".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")
        if case is None or case.is_relevance:
            return "None of the available functions can answer that."
        if body.get("tools"):
            calls = oracle_calls(case, underscores=True)
            if self.native_tool_calls:
                return Reply(None, [call(n, a) for n, a in calls])
            first = calls[0]
            return "```json\n" + json.dumps({"name": first[0], "arguments": first[1]}) + "\n```"
        if "You are an expert in composing functions" in system:
            calls = oracle_calls(case, underscores=False)
            return "[" + ", ".join(python_call(n, a) for n, a in calls) + "]"
        calls = oracle_calls(case, underscores=True)
        return json.dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in calls]})
