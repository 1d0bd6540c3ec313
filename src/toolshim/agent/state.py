"""One run's state: history, tool runs, turns, usage, warnings, and the reply being read."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolshim.accumulate import ChoiceAccumulator
from toolshim.agent.guards import CallLedger, PlannedCall
from toolshim.agent.result import AgentResult, StopReason, ToolRun, TurnRecord
from toolshim.types import EMPTY, Completion, Message, Metadata, StreamChunk, ToolCall, Usage
from toolshim.wire.openai_chat.messages import message_to_dict

__all__ = ["Reply", "RunState", "Stop"]

_NOT_SENT_BACK = frozenset(
    {
        *("role", "content", "tool_calls", "tool_call_id", "name"),  # written by the loop
        *("function_call", "refusal", "annotations", "audio"),  # answers, not history
    }
)
"""Message fields that are not sent back as they came."""


@dataclass(frozen=True, slots=True)
class Stop:
    """A safeguard's decision to end the run: why, and the answer given instead."""

    reason: StopReason
    answer: str
    why: str
    warning: str | None = None


@dataclass
class RunState:
    """Everything one run accumulates; :meth:`result` freezes it into an AgentResult."""

    messages: list[dict[str, Any]]
    model: str = ""
    tool_runs: list[ToolRun] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    warnings: list[str] = field(default_factory=list)
    ledger: CallLedger = field(default_factory=CallLedger)
    unknown_streak: int = 0
    executed: int = 0
    output: str = ""
    stopped: StopReason | None = None
    _turn_runs: dict[int, ToolRun] = field(default_factory=dict)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def add_reply(self, reply: Reply) -> None:
        self.usage = self.usage + reply.usage
        if reply.meta is not None:
            for warning in reply.meta.warnings:
                self.warn(warning)

    def record(self, planned: PlannedCall, run: ToolRun, index: int) -> None:
        self._turn_runs[index] = run
        if run.ran:
            self.executed += 1
        if run.status != "not_run":
            self.ledger.record(planned.key, run)

    def close_turn(self, planned: Sequence[PlannedCall]) -> None:
        """Append the turn's tool messages, in the order of the calls."""
        for index, item in enumerate(planned):
            run = self._turn_runs.pop(index)
            self.tool_runs.append(run)
            self.messages.append(
                {"role": "tool", "tool_call_id": item.call.id, "content": run.result}
            )

    def close_reply(self, reply: Reply, turn: int, started: float) -> TurnRecord:
        record = reply.record(turn, started)
        self.turns.append(record)
        return record

    def latest_runs(self) -> list[ToolRun]:
        if not self.tool_runs:
            return []
        last = max(r.turn for r in self.tool_runs)
        return [r for r in self.tool_runs if r.turn == last]

    def finish(self, text: str, extra: Mapping[str, Any] = EMPTY) -> None:
        """End with ``text``; ``extra`` is what the provider put on that message, sent back too."""
        self.output = text
        self.messages.append({"role": "assistant", "content": text, **extra})

    def stop(self, stop: Stop) -> None:
        self.stopped = stop.reason
        self.warn(stop.warning or f"stopped: {stop.why}")
        self.finish(stop.answer)

    def result(self) -> AgentResult:
        return AgentResult(
            output=self.output,
            messages=self.messages,
            tool_runs=self.tool_runs,
            turns=self.turns,
            usage=self.usage,
            warnings=self.warnings,
            stopped=self.stopped,
            model=self.model,
        )


class Reply:
    """One model reply, from a completion or accumulated from stream chunks.

    What the provider put on the message besides text and calls (``reasoning_details``,
    ``reasoning_content``), and on each call (Gemini's ``extra_content`` thought signature), is
    kept to be sent back in the history: providers reject a next request that lacks it.
    """

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.meta: Metadata | None = None
        self._streamed = ChoiceAccumulator()
        self._extra: dict[str, Any] = self._streamed.extra
        self._whole: tuple[ToolCall, ...] | None = None

    def take(self, completion: Completion) -> None:
        self.text = completion.text
        self.finish_reason = completion.finish_reason
        self.usage = completion.usage
        self.meta = completion.meta
        self._whole = completion.tool_calls
        if completion.choices:
            self._extra = dict(completion.message.extra)

    def add(self, chunk: StreamChunk) -> str | None:
        """Take one chunk; return its new text, if any."""
        streamed = self._streamed
        text = streamed.add(chunk)
        self.usage, self.meta, self.finish_reason = (
            streamed.usage,
            streamed.meta,
            streamed.finish_reason,
        )
        if text:
            self.text += text
        return text

    def calls(self, turn: int) -> tuple[ToolCall, ...]:
        if self._whole is not None:
            return self._whole
        return tuple(
            replace(call, arguments=call.arguments or "{}")
            for call in self._streamed.tool_calls(lambda index: f"call_{turn}_{index}")
        )

    @property
    def extra(self) -> dict[str, Any]:
        """The message's own fields to send back (not nulls, refusals or output-only ones)."""
        return {k: v for k, v in self._extra.items() if v is not None and k not in _NOT_SENT_BACK}

    def message(self, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """This reply, making ``calls``, as the assistant message of the history: with all the
        provider put on it and on each call, to be sent back."""
        message = Message("assistant", self.text or None, tool_calls=tuple(calls), extra=self.extra)
        return message_to_dict(message)

    def record(self, turn: int, started: float) -> TurnRecord:
        return TurnRecord(
            index=turn,
            text=self.text,
            tool_calls=tuple(c.name for c in self.calls(turn)),
            finish_reason=self.finish_reason,
            usage=self.usage,
            meta=self.meta,
            duration=time.perf_counter() - started,
        )
