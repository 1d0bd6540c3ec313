"""Recognise an upstream's "this model does not support tools" answer, by its text.

The status code is no guide (Ollama says 400, llama-server 500), so each known rejection is a
pattern over the error message. Add new servers' wording to :data:`REJECTIONS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolshim.errors import UpstreamStatusError

__all__ = ["REJECTIONS", "Rejection", "match_rejection"]


@dataclass(frozen=True, slots=True)
class Rejection:
    """One known way an upstream says it cannot take ``tools``."""

    server: str
    pattern: re.Pattern[str]
    example: str


def _r(server: str, pattern: str, example: str) -> Rejection:
    return Rejection(server, re.compile(pattern, re.IGNORECASE), example)


REJECTIONS: list[Rejection] = [
    _r(
        "ollama",
        r"does not support tools",
        "registry.ollama.ai/library/gemma3:1b does not support tools",
    ),
    _r("llama-server", r"tools param requires --jinja", "tools param requires --jinja flag"),
    _r(
        "vllm",
        r'"?auto"? tool choice requires --enable-auto-tool-choice',
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ),
    _r(
        "openrouter",
        r"no endpoints found that support tool use",
        "No endpoints found that support tool use.",
    ),
]


def match_rejection(error: BaseException) -> Rejection | None:
    """The rejection ``error`` is, or None when it is some other failure."""
    if not isinstance(error, UpstreamStatusError):
        return None
    text = error.upstream_message
    if not isinstance(text, str):
        return None
    for rejection in REJECTIONS:
        if rejection.pattern.search(text):
            return rejection
    return None
