"""The OpenAI chat-completions wire format: requests validated into core types, answers read
leniently, both written back without losing a field. (One import point over
:mod:`.requests`, :mod:`.responses` and :mod:`.messages`.)"""

from __future__ import annotations

from toolshim.wire.messages import message_from_dict, message_to_dict
from toolshim.wire.requests import parse_request, request_to_body
from toolshim.wire.responses import (
    chunk_from_dict,
    chunk_to_dict,
    completion_from_dict,
    completion_to_dict,
    new_completion_id,
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
