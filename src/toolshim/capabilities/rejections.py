"""Recognise an upstream's "this model cannot take tools" answer, by its text.

The status code is no guide (Ollama says 400, llama-server 500, OpenRouter 404), so each known
rejection is a pattern over the error message, with the server it comes from, a real example
and where that example was seen. Add new wordings to :data:`REJECTIONS` (with an example: the
tests check that every example matches its own entry and that ordinary failures do not).

Two guards keep ordinary errors out: an authentication or rate-limit status (401, 403, 429)
is never a rejection, and a validation error that echoes the caller's input (pydantic's
``input_value=…``) only counts for the entries marked ``echo_safe`` (whose pattern looks at
the error's structure, not at free text the user may have written).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from toolshim.errors import UpstreamStatusError

__all__ = ["REJECTIONS", "Rejection", "match_rejection", "match_text"]

_NEVER_REJECTION_STATUS = frozenset({401, 403, 429})
_ECHO = re.compile(r"input_value=|['\"]input['\"]\s*:")


@dataclass(frozen=True, slots=True)
class Rejection:
    """One known way an upstream says it cannot take ``tools`` (or ``tool_choice``)."""

    server: str
    pattern: re.Pattern[str]
    example: str
    reference: str
    fact: str = "native_tools"
    """The capability the rejection disproves: ``native_tools`` or ``tool_choice``."""
    echo_safe: bool = False


def _r(
    server: str,
    pattern: str,
    example: str,
    reference: str,
    *,
    fact: str = "native_tools",
    echo_safe: bool = False,
) -> Rejection:
    return Rejection(
        server, re.compile(pattern, re.IGNORECASE), example, reference, fact, echo_safe
    )


REJECTIONS: list[Rejection] = [
    # -- "this model cannot take tools" ------------------------------------------------------
    _r(
        "ollama",
        r"does not support tools",
        "registry.ollama.ai/library/gemma3:4b does not support tools",
        "HTTP 400 from /v1/chat/completions and /api/chat; ollama/ollama#9680, #5793",
    ),
    _r(
        "llama-server",
        r"tools param requires --jinja",
        "tools param requires --jinja flag",
        "HTTP 500 from llama.cpp's server without --jinja; defilantech/LLMKube#126",
    ),
    _r(
        "llama-server (before --jinja existed)",
        r"unsupported param: tools\b",
        "Unsupported param: tools",
        "HTTP 500 from older llama.cpp builds; ggml-org/llama.cpp#10920",
    ),
    _r(
        "llama-server (tools with stream)",
        r"cannot use tools with stream",
        "Cannot use tools with stream",
        "HTTP 500 from llama.cpp builds that parse tool calls only without streaming",
    ),
    _r(
        "vllm",
        r'"?auto"? tool choice requires --enable-auto-tool-choice',
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "HTTP 400 from vLLM started without a tool parser; vllm-project/vllm#9986",
    ),
    _r(
        "openrouter",
        r"no endpoints found that support tool use",
        "No endpoints found that support tool use. To learn more about provider routing, "
        "visit: https://openrouter.ai/docs/provider-routing",
        "HTTP 404 from OpenRouter; evalstate/fast-agent#122, mastra-ai/mastra#2839",
    ),
    _r(
        "litellm",
        r"does not support parameters:.*['\"]tools['\"]",
        "litellm.UnsupportedParamsError: together_ai does not support parameters: ['tools'], "
        "for model=Qwen/Qwen3.7-Max. To drop these, set `litellm.drop_params=True`",
        "LiteLLM proxy, HTTP 400/500; BerriAI/litellm#38265",
    ),
    _r(
        "openai",
        r"(?:unsupported parameter|unknown parameter|unrecognized request argument)\W+(?:supplied\W+)?'?tools\b",
        "Unsupported parameter: 'tools' is not supported with this model.",
        "HTTP 400 from OpenAI and Azure OpenAI for o1-mini / o1-preview and older deployments",
    ),
    _r(
        "mistral / gemini",
        r"function calling is not enabled for",
        "Function calling is not enabled for models/gemma-3-27b-it",
        "HTTP 400 from the Gemini API (Gemma models) and Mistral's API (code 3051); "
        "BerriAI/litellm#10313",
    ),
    _r(
        "deepseek",
        r"does not support function calling",
        "deepseek-reasoner does not support Function Calling",
        "HTTP 400 from api.deepseek.com; spring-projects/spring-ai#2643",
    ),
    _r(
        "groq",
        r"tool (?:calling|use) is not supported (?:with|for|by) this model",
        "tool calling is not supported with this model",
        "HTTP 400 from Groq (param 'tool calling'); langflow-ai/langflow#11120",
    ),
    _r(
        "xai",
        r"model does not support tool use or function calling",
        "Invalid request content: The model does not support tool use or function calling but "
        "tools or tool_choice have been specified on the request.",
        "HTTP 400 from xAI; google/adk-python#952",
    ),
    _r(
        "dashscope (qwen cloud)",
        r"the tool call is not supported",
        "<400> InternalError.Algo.InvalidParameter: The tool call is not supported.",
        "HTTP 400 from Alibaba DashScope's OpenAI-compatible mode; agno-agi/agno#2929",
    ),
    _r(
        "zhipu / glm",
        r"'tools' is not supported for model",
        "'tools' is not supported for model glm-3",
        "HTTP 400 from BigModel (GLM) endpoints",
    ),
    _r(
        "strict rust servers (serde)",
        r"unknown field:?\s*`?tools`?(?![\w])",
        "Failed to deserialize the JSON body into the target type: unknown field `tools`",
        "HTTP 422 from servers that reject unknown JSON fields; seed 004 ('unknown field: tools')",
    ),
    _r(
        "strict python servers (pydantic)",
        r"extra_forbidden['\"],\s*['\"]loc['\"]:\s*[\[(]\s*['\"]body['\"],\s*['\"]tools['\"]"
        r"|\btools\W+extra fields not permitted",
        "[{'type': 'extra_forbidden', 'loc': ('body', 'tools'), 'msg': 'Extra inputs are not "
        "permitted', 'input': [{'type': 'function'}]}]",
        "HTTP 422 from FastAPI servers whose request model forbids extra fields",
        echo_safe=True,
    ),
    # -- "this server cannot take tool_choice" ------------------------------------------------
    _r(
        "openrouter",
        r"no endpoints found that support the provided 'tool_choice'",
        "No endpoints found that support the provided 'tool_choice' value. To learn more about "
        "provider routing, visit: https://openrouter.ai/docs/provider-routing",
        "HTTP 404 from OpenRouter; zed-industries/zed#36094",
        fact="tool_choice",
    ),
    _r(
        "lm-studio",
        r"invalid tool_choice type",
        "Invalid tool_choice type: 'object'. Supported string values: none, auto, required",
        "HTTP 400 from LM Studio for a named tool_choice; antropia-studio/linguito#21",
        fact="tool_choice",
    ),
    _r(
        "deepseek",
        r"does not support this tool_choice",
        "deepseek-reasoner does not support this tool_choice",
        "HTTP 400 from api.deepseek.com; google-gemini/gemini-fullstack-langgraph-quickstart#123",
        fact="tool_choice",
    ),
    _r(
        "llama-server",
        r"unsupported param: tool_choice",
        "Unsupported param: tool_choice",
        "HTTP 500 from llama.cpp's server without --jinja",
        fact="tool_choice",
    ),
]


def match_text(
    text: str, *, status: int | None = None, fact: str = "native_tools"
) -> Rejection | None:
    """The entry of :data:`REJECTIONS` for ``fact`` that ``text`` is, or None."""
    if status in _NEVER_REJECTION_STATUS or not text:
        return None
    echoes = bool(_ECHO.search(text))
    for rejection in REJECTIONS:
        if rejection.fact != fact or (echoes and not rejection.echo_safe):
            continue
        if rejection.pattern.search(text):
            return rejection
    return None


def match_rejection(error: BaseException, *, fact: str = "native_tools") -> Rejection | None:
    """The rejection ``error`` is (for ``fact``, by default tools), or None for any other failure.

    Only an upstream's HTTP error answer can be a rejection; its message is searched, and so is
    a provider error that a router passed on inside the body (OpenRouter's ``metadata.raw``).
    """
    if not isinstance(error, UpstreamStatusError):
        return None
    for text in _messages(error):
        found = match_text(text, status=error.status, fact=fact)
        if found is not None:
            return found
    return None


def _messages(error: UpstreamStatusError) -> Iterator[str]:
    if isinstance(error.upstream_message, str):
        yield error.upstream_message
    body: Any = error.body
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            metadata = inner.get("metadata")
            if isinstance(metadata, Mapping) and isinstance(metadata.get("raw"), str):
                yield metadata["raw"]
