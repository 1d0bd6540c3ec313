"""Upstreams: the model servers toolshim talks to."""

from toolshim.upstreams._policy import Deadlines, RetryPolicy
from toolshim.upstreams.base import Upstream
from toolshim.upstreams.chat_completions import ChatCompletionsUpstream
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, OpenAIUpstream, normalize_base_url

__all__ = [
    "DEFAULT_TIMEOUT",
    "ChatCompletionsUpstream",
    "Deadlines",
    "OpenAIUpstream",
    "RetryPolicy",
    "Upstream",
    "normalize_base_url",
]
