"""The chat transcript: each exchange with its tool calls, results and metadata; ``/save`` writes it."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from toolshim import __version__
from toolshim.agent.result import AgentResult, usage_dict

__all__ = ["Question", "Transcript", "now_iso"]

FORMAT = "toolshim-chat-transcript/1"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Question:
    """What the transcript keeps about a question, whatever answered it: its text, and the
    model, mode and tools it was asked with."""

    question: str
    model: str
    mode: str
    tools: str


@dataclass
class Transcript:
    """Exchanges (a question and everything that answered it) and session events (swaps, modes)."""

    upstream: str
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    started_at: str = field(default_factory=now_iso)

    def event(self, kind: str, **details: Any) -> None:
        self.events.append({"at": now_iso(), "type": kind, **details})

    def exchange(
        self,
        asked: Question,
        outcome: str,
        seconds: float = 0.0,
        *,
        result: AgentResult | None = None,
        answer: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record one question and what answered it (``outcome``: answered, cancelled, error, or
        ``stopped: <reason>`` when a safeguard ended the run)."""
        record: dict[str, Any] = {
            "index": len(self.exchanges) + 1,
            "at": now_iso(),
            "model": asked.model,
            "mode": asked.mode,
            "tools": asked.tools,
            "question": asked.question,
            "outcome": outcome,
            "answer": result.output if result is not None else answer,
            "seconds": round(seconds, 3),
        }
        if error is not None:
            record["error"] = error
        if result is not None:
            record["tool_runs"] = [run.to_dict() for run in result.tool_runs]
            record["turns"] = [turn.to_dict() for turn in result.turns]
            record["warnings"] = list(result.warnings)
            record["usage"] = usage_dict(result.usage)
        self.exchanges.append(record)

    def clear(self) -> None:
        self.exchanges.clear()
        self.event("clear")

    def as_dict(
        self,
        *,
        model: str | None,
        mode: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
    ) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "toolshim_version": __version__,
            "started_at": self.started_at,
            "saved_at": now_iso(),
            "upstream": self.upstream,
            "model": model,
            "mode": mode,
            "tools": tools,
            "messages": to_jsonable_python(messages, fallback=str),
            "exchanges": to_jsonable_python(self.exchanges, fallback=str),
            "events": self.events,
        }


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file, then renamed).

    Raises OSError (``IsADirectoryError``, ``FileNotFoundError`` for a missing directory, …).
    """
    target = path.expanduser()
    if target.is_dir():
        raise IsADirectoryError(21, "is a directory; give a file name, e.g. chat.json")
    if not target.parent.is_dir():
        raise FileNotFoundError(2, f"the directory {str(target.parent)!r} does not exist")
    text = json.dumps(data, ensure_ascii=False, indent=2)
    handle, temporary = tempfile.mkstemp(prefix=".toolshim-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target.resolve()


__all__ += ["write_json"]
