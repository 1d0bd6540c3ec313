"""The OpenAI chat-completions JSON readers and writers under their older import path (the
protocol's module is :mod:`toolshim.wire.openai_chat`)."""

from __future__ import annotations

from toolshim.wire.openai_chat import (
    chunk_from_dict,
    chunk_to_dict,
    completion_from_dict,
    completion_to_dict,
    message_from_dict,
    message_to_dict,
    new_completion_id,
    parse_request,
    request_to_body,
    usage_from_dict,
    usage_to_dict,
)

__all__ = [
    "chunk_from_dict",
    "chunk_to_dict",
    "completion_from_dict",
    "completion_to_dict",
    "message_from_dict",
    "message_to_dict",
    "new_completion_id",
    "parse_request",
    "request_to_body",
    "usage_from_dict",
    "usage_to_dict",
]
