"""Running BFCL's multi-turn cases: user turns, model steps, BFCL's simulated APIs, BFCL's score.

A case runs as BFCL's own multi-turn inference loop runs it (``BaseHandler.inference_multi_turn_FC``
and ``_prompting``): the user's turns are sent one after another; within a turn, each model
step's calls are decoded, executed on BFCL's simulated APIs and their results sent back, until
a step makes no call (the turn is over) or the step limit is passed (BFCL's force-quit: the
case fails). At a held-out function's turn (``multi_turn_miss_func``) the functions are added
and BFCL's own user message says so. The conversation is then scored by BFCL's checker.

Configurations, as in the single-turn evaluation (:class:`~toolshim.evaluation.runner.EvalConfig`):

* ``native``: the tools straight to the upstream, only ``message.tool_calls`` read, results
  returned as ``role=tool`` messages (BFCL's OpenAI handler);
* ``bfcl-prompt``: BFCL's prompt-mode system prompt, the reply decoded by BFCL's prompt-mode
  decoder, results returned as one user message (BFCL's prompting handler);
* a toolshim configuration: the same requests as ``native``, through toolshim's engine.

Every request carries ``temperature`` and ``max_tokens``. Failure kinds, first that applies:
``error`` (a request failed), ``hang`` (the case's time budget ran out), ``force_quit`` (a
turn passed the step limit), else BFCL's error type (``state_mismatch``,
``response_mismatch``, ``empty_turn`` …).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolshim.errors import ToolshimError
from toolshim.evaluation.bfcl import load_bfcl
from toolshim.evaluation.bfcl_multi_turn import (
    MultiTurnCase,
    Simulator,
    decode_step,
    is_empty,
    load_multi_turn,
    score_multi_turn,
)
from toolshim.evaluation.runner import EvalConfig, Record, SuiteRunner, SuiteSettings, interleave
from toolshim.upstreams.base import Upstream

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["RESULT_PREVIEW", "MultiTurnRecord", "MultiTurnRunner", "failure_kind"]

RESULT_PREVIEW = 300
"""Characters of each tool result kept in a record's trace."""

_BFCL_FAILURES = {
    "multi_turn:force_terminated": "force_quit",
    "multi_turn:instance_state_mismatch": "state_mismatch",
    "multi_turn:execution_response_mismatch": "response_mismatch",
    "multi_turn:empty_turn_model_response": "empty_turn",
}


def failure_kind(error_type: str | None) -> str:
    """A short name for BFCL's error type (``multi_turn:instance_state_mismatch`` ->
    ``state_mismatch``)."""
    if not error_type:
        return "wrong"
    return _BFCL_FAILURES.get(error_type, error_type.rpartition(":")[2])


@dataclass
class MultiTurnRecord(Record):
    """One case under one configuration (a row of the JSON report)."""

    case_id: str
    category: str
    config: str
    valid: bool
    failure: str | None
    """None when valid; else ``error``, ``hang``, ``force_quit`` or BFCL's error kind."""
    turns: int
    """User turns the conversation reached."""
    steps: int
    """Model steps (replies) over every turn."""
    llm_calls: int
    """Requests to the upstream (toolshim's re-asks and continuations included)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    """BFCL's error message, or the failure of a request."""
    trace: list[list[dict[str, Any]]] = field(default_factory=list)
    """Per turn, per step: the reply's ``text``, its decoded ``calls`` and their ``results``
    (each cut to :data:`RESULT_PREVIEW` characters)."""
    warnings: list[str] = field(default_factory=list)

    @property
    def calls_per_turn(self) -> float:
        return self.llm_calls / self.turns if self.turns else 0.0


@dataclass
class _Conversation:
    """The state of one case's run."""

    case: MultiTurnCase
    config: EvalConfig
    simulator: Simulator
    messages: list[dict[str, Any]] = field(default_factory=list)
    functions: list[Mapping[str, Any]] = field(default_factory=list)
    outputs: list[list[Any]] = field(default_factory=list)
    """Per turn, what BFCL's handler stores of each step (calls or text)."""
    trace: list[list[dict[str, Any]]] = field(default_factory=list)
    steps: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    warnings: list[str] = field(default_factory=list)
    force_quit: bool = False


class MultiTurnRunner(SuiteRunner[MultiTurnCase, MultiTurnRecord]):
    """Runs BFCL multi-turn cases through configurations against one upstream and one model."""

    def __init__(
        self,
        upstream: Upstream,
        model: str,
        configs: Iterable[EvalConfig],
        *,
        max_tokens: int | None = 512,
        max_steps: int | None = None,
        budget: float = 1800.0,
        **settings: Unpack[SuiteSettings],
    ) -> None:
        """``max_steps``: steps a user turn may take before the case is force-quit (None:
        BFCL's own limit, 20); ``budget``: seconds a case may take."""
        super().__init__(upstream, model, configs, settings)
        self.max_tokens = max_tokens
        self.max_steps = max_steps if max_steps is not None else load_multi_turn().max_steps
        self.budget = budget

    def ordered(self, items: Sequence[MultiTurnCase]) -> Sequence[MultiTurnCase]:
        return interleave(items)

    async def run_one(self, case: MultiTurnCase, config: EvalConfig) -> MultiTurnRecord:
        """One case under one configuration; a failure becomes a failed record."""
        started = time.perf_counter()
        with Simulator(case, config.label) as simulator:
            run = _Conversation(case, config, simulator, functions=list(case.functions))
            failure: str | None = None
            error: str | None = None
            try:
                await asyncio.wait_for(self._converse(run), self.budget)
            except TimeoutError:
                failure, error = "hang", f"the case's {self.budget:.0f} s budget ran out"
            except ToolshimError as exc:
                failure, error = "error", f"{type(exc).__name__}: {exc.message}"
        valid = False
        if failure is None:
            verdict = score_multi_turn(case, run.outputs, decoder=config.decoder)
            valid = verdict.valid
            failure = None if valid else failure_kind(verdict.error_type)
            error = verdict.error
        return MultiTurnRecord(
            case_id=case.id,
            category=case.category,
            config=config.label,
            valid=valid,
            failure=failure,
            turns=len(run.outputs),
            steps=run.steps,
            llm_calls=run.llm_calls,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            seconds=round(time.perf_counter() - started, 3),
            error=error,
            trace=run.trace,
            warnings=run.warnings,
        )

    async def _converse(self, run: _Conversation) -> None:
        m = load_multi_turn()
        prompt_mode = run.config.kind == "bfcl-prompt"
        for index, turn in enumerate(run.case.turns):
            messages = [dict(message) for message in turn]
            if index in run.case.held_out:
                added = list(run.case.held_out[index])
                run.functions.extend(added)
                text = (
                    m.additional_function_prompt_prompting.format(functions=added)
                    if prompt_mode
                    else m.additional_function_prompt_fc
                )
                messages = [{"role": "user", "content": text}]
            if index == 0 and prompt_mode:
                b = load_bfcl()
                messages = b.system_prompt_pre_processing_chat_model(
                    messages, [dict(f) for f in run.functions], run.case.id
                )
            run.messages.extend(messages)
            run.outputs.append([])
            run.trace.append([])
            if not await self._turn(run):
                return

    async def _turn(self, run: _Conversation) -> bool:
        """One user turn's steps; False when the step limit was passed (BFCL's force-quit)."""
        count = 0
        while True:
            message = await self._ask(run)
            run.steps += 1
            calls = message.get("tool_calls") or []
            text = message.get("content")
            if run.config.kind == "bfcl-prompt":
                output: Any = text or ""
            else:
                output = [{c["function"]["name"]: c["function"]["arguments"]} for c in calls]
                output = output or text or ""
            run.outputs[-1].append(output)
            step: dict[str, Any] = {"text": text}
            run.trace[-1].append(step)
            assistant: dict[str, Any] = {"role": "assistant", "content": text}
            if calls and run.config.kind != "bfcl-prompt":
                assistant["tool_calls"] = calls
            run.messages.append(assistant)
            try:
                decoded = decode_step(output, run.config.decoder)
            except Exception as exc:  # BFCL ends the turn on whatever its decoders raise
                step["decode_error"] = f"{type(exc).__name__}: {exc}"[:RESULT_PREVIEW]
                return True
            if is_empty(decoded):
                return True
            step["calls"] = decoded
            results = run.simulator.execute(decoded)
            step["results"] = [r[:RESULT_PREVIEW] for r in results]
            if run.config.kind == "bfcl-prompt":
                m = load_multi_turn()
                content = m.format_execution_results_prompting(
                    {}, results, {"model_responses_decoded": decoded}
                )
                run.messages.append({"role": "user", "content": content})
            else:
                for result, call in zip(results, calls, strict=False):
                    run.messages.append(
                        {"role": "tool", "tool_call_id": call.get("id"), "content": result}
                    )
            count += 1
            if count > self.max_steps:
                run.force_quit = True
                return False

    async def _ask(self, run: _Conversation) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": run.messages,
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if run.config.kind != "bfcl-prompt":
            b = load_bfcl()
            functions = [dict(f) for f in run.functions]
            body["tools"] = b.convert_to_tool(
                functions, b.gorilla_to_openapi, b.openai_completions_style
            )
        message, _ = await self.ask(run.config, body, run)
        return message
