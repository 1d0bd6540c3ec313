"""The OpenAI Chat Completions protocol, which the proxy serves and upstreams are spoken in.

:mod:`.codec`     the proxy's codec (``POST /v1/chat/completions``) and the error body
:mod:`.requests`  requests read into a :class:`~toolshim.types.ChatRequest` and written back
:mod:`.answers`   completions and stream chunks read leniently and written exactly
:mod:`.messages`  one message each way
:mod:`.legacy`    the legacy ``functions`` / ``function_call`` shape, upgraded and written
"""

from toolshim.wire.openai_chat.answers import (
    chunk_from_dict,
    chunk_to_dict,
    completion_from_dict,
    completion_to_dict,
    new_completion_id,
    usage_from_dict,
    usage_to_dict,
)
from toolshim.wire.openai_chat.codec import (
    CODEC,
    DONE,
    ChatCodec,
    ChatStreamEncoder,
    error_body,
    split_overrides,
)
from toolshim.wire.openai_chat.messages import message_from_dict, message_to_dict
from toolshim.wire.openai_chat.requests import parse_request, read_request, request_to_body

__all__ = [
    "CODEC",
    "DONE",
    "ChatCodec",
    "ChatStreamEncoder",
    "chunk_from_dict",
    "chunk_to_dict",
    "completion_from_dict",
    "completion_to_dict",
    "error_body",
    "message_from_dict",
    "message_to_dict",
    "new_completion_id",
    "parse_request",
    "read_request",
    "request_to_body",
    "split_overrides",
    "usage_from_dict",
    "usage_to_dict",
]
