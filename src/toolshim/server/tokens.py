"""Counting a request's input tokens (``POST /v1/messages/count_tokens``): the upstream's own
tokenizer where it has one (llama-server's ``POST /tokenize``, the embedded model's too),
else an estimate of one token per four characters.

What is counted is the request's text as toolshim would send it on: the system prompt, every
message's text and tool calls, and the tool definitions as JSON (not the chat template's own
tokens, nor an emulation prompt's instructions). The answer says which count it is:
``{"input_tokens": N, "toolshim": {"token_count": "upstream" | "estimate"}}``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from toolshim.engine import Engine
from toolshim.server.asgi import decode_json_object, log_failure, read_body, send_json
from toolshim.server.endpoint import ServerSettings
from toolshim.types import ChatRequest
from toolshim.wire.base import Codec

__all__ = ["CHARS_PER_TOKEN", "CountTokens", "estimate_tokens", "request_text"]

log = logging.getLogger("toolshim.server")

CHARS_PER_TOKEN = 4
"""The estimate's ratio (English prose and code average 3.5-4.5 characters a token)."""
TOKENIZE_TIMEOUT = 5.0


def request_text(request: ChatRequest) -> str:
    """The text of a request that a tokenizer would see (messages, calls, tool definitions)."""
    parts: list[str] = []
    for message in request.messages:
        parts.append(message.text)
        for call in message.tool_calls:
            parts.append(f"{call.name}({call.arguments})")
    for tool in request.tools:
        parts.append(orjson.dumps(tool.to_openai()).decode())
    return "\n".join(p for p in parts if p)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class CountTokens:
    """The token-counting route: decode with the route's codec, count, answer."""

    def __init__(self, codec: Codec, engine: Engine, settings: ServerSettings) -> None:
        self.codec = codec
        self.engine = engine
        self.settings = settings
        self._no_tokenizer: set[str] = set()
        """Upstreams whose ``/tokenize`` failed once (not asked again)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await read_body(receive)
            if body is None:
                return
            payload = decode_json_object(body)
            self.settings.choose_model(payload)
            self.settings.limits.check_payload(payload)
            request = self.codec.decode(payload).request
            text = request_text(request)
            counted = await self._tokenize(text)
        except Exception as exc:
            status, error = self.codec.error(exc)
            log_failure(exc, status)
            await send_json(send, status, error)
            return
        source = "upstream" if counted is not None else "estimate"
        tokens = counted if counted is not None else estimate_tokens(text)
        await send_json(send, 200, {"input_tokens": tokens, "toolshim": {"token_count": source}})

    async def _tokenize(self, text: str) -> int | None:
        """The upstream's count, or None where it has no ``/tokenize`` (or it failed). The
        upstream adapter asks (its pooled connections, its credentials: a ``user:pass@`` URL or
        ``--upstream-api-key``)."""
        upstream: Any = self.engine.upstream
        while hasattr(upstream, "inner"):  # (wrappers such as the metrics' ObservedUpstream)
            upstream = upstream.inner
        tokenize = getattr(upstream, "tokenize", None)
        where = str(getattr(upstream, "base_url", "") or type(upstream).__name__)
        if tokenize is None or where in self._no_tokenizer:
            return None
        tokens = await tokenize(text, within=TOKENIZE_TIMEOUT)
        if not isinstance(tokens, int):
            log.info("%s has no /tokenize; token counts are estimates", where)
            self._no_tokenizer.add(where)
            return None
        return tokens
