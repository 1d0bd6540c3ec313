"""The table of "this model cannot take tools" answers, and the ordinary errors it must ignore."""

from __future__ import annotations

import pytest

from toolshim.capabilities.rejections import REJECTIONS, Rejection, match_rejection, match_text
from toolshim.errors import UpstreamConnectionError, UpstreamStatusError, UpstreamTimeoutError
from toolshim.testing import REJECTION_MESSAGES, rejection_error


def status_error(message: str, status: int = 400, body: object = None) -> UpstreamStatusError:
    return UpstreamStatusError(message, status=status, body=body or {"error": {"message": message}})


@pytest.mark.parametrize("entry", REJECTIONS, ids=lambda r: f"{r.fact}:{r.server}")
def test_every_entry_matches_its_own_example(entry: Rejection) -> None:
    assert match_text(entry.example, fact=entry.fact) is entry
    assert entry.reference, "say where the wording was seen"
    other = "tool_choice" if entry.fact == "native_tools" else "native_tools"
    assert match_text(entry.example, fact=other) is None


@pytest.mark.parametrize(
    ("text", "server"),
    [
        ("llama3 does not support tools", "ollama"),
        (
            "hf.co/empower-dev/llama3-empower-functions-small-gguf-v1.1 does not support tools",
            "ollama",
        ),
        ("registry.ollama.ai/library/deepseek-r1:1.5b does not support tools", "ollama"),
        ("This model does not support tools", "ollama"),
        ("tools param requires --jinja flag", "llama-server"),
        (
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            "vllm",
        ),
        (
            'No endpoints found that support tool use. Try disabling "question". To learn more '
            "about provider routing, visit: https://openrouter.ai/docs/guides/routing/provider-selection",
            "openrouter",
        ),
        (
            "litellm.UnsupportedParamsError: ollama does not support parameters: {'tools': [{'type': "
            "'function'}]}, for model=gemma3",
            "litellm",
        ),
        ("Unrecognized request argument supplied: tools", "openai"),
        ("Unknown parameter: 'tools'.", "openai"),
        ("Function calling is not enabled for this model", "mistral / gemini"),
        ("Function calling is not enabled for models/gemma-3n-e4b-it", "mistral / gemini"),
        ("Tool calling is not supported by this model", "groq"),
        ("Tool calling is not supported for this model", "groq"),
        ("unknown field: tools", "strict rust servers (serde)"),
        (
            '[{"type": "extra_forbidden", "loc": ["body", "tools"], "msg": "Extra inputs are not '
            'permitted", "input": [{"type": "function"}]}]',
            "strict python servers (pydantic)",
        ),
        ("tools: extra fields not permitted", "strict python servers (pydantic)"),
    ],
)
def test_real_world_wordings_are_recognised(text: str, server: str) -> None:
    found = match_text(text)
    assert found is not None and found.server == server


@pytest.mark.parametrize(
    "text",
    [
        # bad model names
        "model 'llama9' not found, try pulling it first",
        "The model `gpt-9` does not exist or you do not have access to it.",
        "No endpoints found for nousresearch/hermes-3-llama-3.1-405b:free.",
        # context length
        "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9000 tokens. Please reduce the length of the messages.",
        "the request exceeds the available context size, try increasing it",
        # other capabilities and parameters
        '"gemma3:1b" does not support thinking',
        '"nomic-embed-text" does not support chat',
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
        "'max_completion_tokens' instead.",
        "Unrecognized request argument supplied: logprobs",
        "litellm.UnsupportedParamsError: mistral does not support parameters: {'dimensions': 1024}, "
        "for model=mistral-embed",
        "Image input is not supported by this model",
        # tool-calling errors that are not "no tools here"
        "Invalid schema for function 'get_diary': 'date' is not valid",
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'.",
        "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more "
        "details.",
        "Unsupported param: tool_choice",  # a tool_choice rejection, not a tools one
        # a validation error that echoes the user's own words
        "1 validation error for ChatCompletionRequest\nmessages.1.content\n  Input should be a "
        "valid string [type=string_type, input_value='Why does this model does not support "
        "tools?', input_type=list]",
        "[{'type': 'string_type', 'loc': ('body', 'messages', 1, 'content'), 'msg': 'Input should "
        "be a valid string', 'input': 'tool use is not supported by the provided model: x'}]",
        # everything else
        "Internal server error",
        "",
    ],
)
def test_ordinary_errors_are_not_rejections(text: str) -> None:
    assert match_text(text) is None
    if text:
        assert match_rejection(status_error(text)) is None


@pytest.mark.parametrize("status", [401, 403, 429])
def test_auth_and_rate_limit_answers_never_count(status: int) -> None:
    error = status_error("registry.ollama.ai/library/x does not support tools", status)
    assert match_rejection(error) is None


def test_rate_limit_wording_is_not_a_rejection() -> None:
    for text in (
        "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit "
        "30000, Used 29000, Requested 2000.",
        "Rate limit exceeded: free-models-per-day.",
    ):
        assert match_rejection(status_error(text, 429)) is None
        assert match_text(text) is None


@pytest.mark.parametrize("kind", sorted(REJECTION_MESSAGES))
def test_the_shipped_fakes_rejections_are_recognised(kind: str) -> None:
    assert match_rejection(rejection_error(kind, "gemma3:1b")) is not None


def test_a_providers_error_passed_on_by_a_router_is_read() -> None:
    raw = '{"error":{"code":400,"message":"Function calling is not enabled for this model.","status":"INVALID_ARGUMENT"}}'
    body = {"error": {"code": 400, "message": "Provider returned error", "metadata": {"raw": raw}}}
    found = match_rejection(status_error("Provider returned error", 400, body))
    assert found is not None and found.server == "mistral / gemini"


def test_only_http_error_answers_can_be_rejections() -> None:
    assert match_rejection(UpstreamTimeoutError("does not support tools")) is None
    assert match_rejection(UpstreamConnectionError("does not support tools")) is None
    assert match_rejection(ValueError("does not support tools")) is None


def test_tool_choice_rejections_are_their_own_kind() -> None:
    found = match_rejection(
        status_error(
            "Invalid tool_choice type: 'object'. Supported string values: none, auto, required"
        ),
        fact="tool_choice",
    )
    assert found is not None and found.server == "lm-studio"
    assert (
        match_rejection(status_error("deepseek-reasoner does not support this tool_choice")) is None
    )
