"""BFCL's single-turn cases through toolshim configurations and the two baselines (see
:mod:`toolshim.evaluation.runner` for what a configuration is), one record per case."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from toolshim.errors import ToolshimError
from toolshim.evaluation.bfcl import BfclCase
from toolshim.evaluation.bfcl_score import score
from toolshim.evaluation.runner import (
    CaseRecord,
    EvalConfig,
    SuiteRunner,
    SuiteSettings,
    interleave,
    message_dict,
)
from toolshim.upstreams.base import Upstream
from toolshim.upstreams.chat_completions import complete_chat_body

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["EvalRunner"]


class EvalRunner(SuiteRunner[BfclCase, CaseRecord]):
    """Runs cases through configurations against one upstream and one model."""

    def __init__(
        self,
        upstream: Upstream,
        model: str,
        configs: Iterable[EvalConfig],
        *,
        max_tokens: int | None = 256,
        **settings: Unpack[SuiteSettings],
    ) -> None:
        super().__init__(upstream, model, configs, settings)
        self.max_tokens = max_tokens

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        return params

    def ordered(self, items: Sequence[BfclCase]) -> Sequence[BfclCase]:
        return interleave(items)

    async def run_one(self, case: BfclCase, config: EvalConfig) -> CaseRecord:
        """One case under one configuration; a failed request becomes a failed record."""
        started = time.perf_counter()
        llm_calls = 0
        message: dict[str, Any] = {}
        warnings: list[str] = []
        usage: Mapping[str, Any] = {}
        failure: ToolshimError | None = None
        try:
            if config.kind == "toolshim":
                completion = await self.engines[config].acomplete(
                    {
                        "model": self.model,
                        "messages": case.chat_messages(),
                        "tools": case.tools(),
                        **self._params(),
                    }
                )
                message = message_dict(completion)
                warnings = list(completion.meta.warnings) if completion.meta else []
                llm_calls = completion.meta.llm_calls if completion.meta else 1
                if completion.usage is not None:
                    usage = {
                        "prompt_tokens": completion.usage.prompt_tokens,
                        "completion_tokens": completion.usage.completion_tokens,
                    }
            else:
                body: dict[str, Any] = {"model": self.model, **self._params()}
                if config.kind == "native":
                    body["messages"] = case.chat_messages()
                    body["tools"] = case.tools()
                else:
                    body["messages"] = case.prompt_messages()
                llm_calls = 1
                reply = await complete_chat_body(self.upstream, body)
                choices = reply.get("choices") or [{}]
                message = dict(choices[0].get("message") or {})
                usage = reply.get("usage") or {}
        except ToolshimError as exc:
            failure = exc
            if exc.meta is not None:
                llm_calls = exc.meta.llm_calls
        record = partial(
            CaseRecord,
            case_id=case.id,
            category=case.category,
            config=config.label,
            llm_calls=llm_calls,
            latency_s=round(time.perf_counter() - started, 3),
        )
        if failure is not None:
            return record(
                valid=False,
                well_formed=None if case.is_relevance else False,
                called=False,
                error=f"{type(failure).__name__}: {failure.message}",
                error_type="request_failed",
            )
        text = message.get("content")
        output = text if config.kind == "bfcl-prompt" else _fc_output(message)
        verdict = score(case, output if output is not None else "", decoder=config.decoder)
        return record(
            valid=verdict.valid,
            well_formed=verdict.well_formed,
            called=verdict.called,
            raw_output=text if isinstance(text, str) else None,
            tool_calls=list(message.get("tool_calls") or []),
            parsed_calls=verdict.decoded,
            error=verdict.error,
            error_type=verdict.error_type,
            warnings=warnings,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
        )


def _fc_output(message: Mapping[str, Any]) -> Any:
    """What BFCL's OpenAI handler stores: ``[{name: arguments}]`` from ``tool_calls``, else the text."""
    calls = message.get("tool_calls") or []
    if calls:
        return [{c["function"]["name"]: c["function"]["arguments"]} for c in calls]
    return message.get("content")
