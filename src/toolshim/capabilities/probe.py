"""The tool-support probe: one request with a dummy tool, classified, never guessed.

==============================  ============  =====================================================
the upstream's answer           outcome       why
==============================  ============  =====================================================
a known rejection               unsupported   it said so (:func:`~toolshim.capabilities.rejections.match_rejection`)
native ``tool_calls``           supported     native tool calling works end to end
the call written as text        unsupported   the model calls, the server does not parse it: the
                                              caller would get JSON in ``content`` (emulation
                                              parses it, so toolshim emulates)
plain text, no call             inconclusive  the server accepted ``tools`` (a template with tools
                                              exists) but the model did not call the tool; that is
                                              evidence of acceptance, not of calling, and a
                                              ``probe`` "yes" would outrank what a later runtime
                                              error says, so nothing is recorded
timeout, network error          inconclusive  says nothing about the model ("no" would be a guess;
                                              seed 004 defaults to "disabled" here, toolshim does not)
any other HTTP error            inconclusive  e.g. 404 unknown model, 401, 429, 500
==============================  ============  =====================================================

:func:`probe_tools` takes any :class:`~toolshim.upstreams.base.Upstream`; :func:`record_probe`
stores a conclusive result with source ``probe``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from toolshim.capabilities.facts import Fact, Source, Support
from toolshim.capabilities.registry import Registry
from toolshim.capabilities.rejections import match_rejection
from toolshim.dialects import parse_reply
from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from toolshim.types import ChatRequest, Message, ToolSpec
from toolshim.upstreams.base import Upstream
from toolshim.upstreams.chat_completions import request_body

__all__ = [
    "DEFAULT_PROBE_TIMEOUT",
    "PROBE_TOOL",
    "ProbeOutcome",
    "ProbeResult",
    "probe_body",
    "probe_request",
    "probe_tools",
    "record_probe",
]

DEFAULT_PROBE_TIMEOUT = 5.0
"""Seconds the probe waits for an answer (seed 004's auto-detect uses 5 s)."""

PROBE_TOOL = ToolSpec(
    "get_current_time",
    "Get the current local time in a time zone.",
    {
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}
        },
        "required": ["timezone"],
    },
)
_QUESTION = "What time is it in Paris right now? Use the get_current_time tool to find out."


class ProbeOutcome(StrEnum):
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What one probe found; ``support`` is None when it found nothing either way."""

    model: str
    outcome: ProbeOutcome
    detail: str
    seconds: float

    @property
    def support(self) -> Support | None:
        if self.outcome is ProbeOutcome.SUPPORTED:
            return Support.YES
        if self.outcome is ProbeOutcome.UNSUPPORTED:
            return Support.NO
        return None


def probe_request(model: str) -> ChatRequest:
    """The probe request: a question that needs the dummy tool, short and deterministic
    (``stream`` is sent as false, not left out)."""
    return ChatRequest(
        model,
        (Message("user", _QUESTION),),
        tools=(PROBE_TOOL,),
        params={"temperature": 0, "max_tokens": 200, "stream": False},
    )


def probe_body(model: str) -> dict[str, Any]:
    """The probe request as an OpenAI chat-completions body."""
    return request_body(probe_request(model))


async def probe_tools(
    upstream: Upstream, model: str, *, time_limit: float = DEFAULT_PROBE_TIMEOUT
) -> ProbeResult:
    """Send one request with a dummy tool to ``model`` and classify the answer (see module)."""
    started = time.perf_counter()

    def result(outcome: ProbeOutcome, detail: str) -> ProbeResult:
        return ProbeResult(model, outcome, detail, time.perf_counter() - started)

    try:
        completion = await asyncio.wait_for(upstream.complete(probe_request(model)), time_limit)
    except TimeoutError:
        return result(ProbeOutcome.INCONCLUSIVE, f"no answer within {time_limit:g} s")
    except UpstreamStatusError as exc:
        rejection = match_rejection(exc)
        if rejection is not None:
            return result(
                ProbeOutcome.UNSUPPORTED,
                f"{rejection.server} rejected tools: {exc.message}"[:500],
            )
        return result(
            ProbeOutcome.INCONCLUSIVE, f"HTTP {exc.status} that is not about tools: {exc.message}"
        )
    except (UpstreamTimeoutError, UpstreamConnectionError) as exc:
        return result(ProbeOutcome.INCONCLUSIVE, exc.message)
    except UpstreamError as exc:
        return result(ProbeOutcome.INCONCLUSIVE, f"unreadable answer: {exc.message}")
    calls = completion.tool_calls
    if calls:
        names = ", ".join(c.name for c in calls)
        return result(ProbeOutcome.SUPPORTED, f"native tool_calls came back ({names})")
    text = completion.text or ""
    written = parse_reply(text, [PROBE_TOOL]).calls
    if written:
        return result(
            ProbeOutcome.UNSUPPORTED,
            f"the model wrote the call as text ({written[0].name}) and the server returned it "
            "in content, not as tool_calls",
        )
    preview = " ".join(text.split())[:80]
    return result(
        ProbeOutcome.INCONCLUSIVE,
        f"the server accepted tools but the model answered in text: {preview!r}",
    )


def record_probe(registry: Registry, upstream: str, result: ProbeResult) -> Fact | None:
    """Store a conclusive result as ``native_tools`` with source ``probe``; return the fact
    that stands afterwards (None for an inconclusive probe, which stores nothing)."""
    support = result.support
    if support is None:
        return None
    return registry.learn(
        upstream, result.model, "native_tools", support, Source.PROBE, detail=result.detail
    )
