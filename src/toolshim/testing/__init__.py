"""Test doubles that ship with toolshim: a scripted upstream and a function-driven one.

:class:`FakeUpstream` plays a model server: ``enqueue`` what it should answer (text, tool
calls, whole completions, or an exception to raise) and read what it was sent in
``history`` (each core request as the chat-completions body an HTTP upstream would have been
sent: both build on :class:`~toolshim.upstreams.chat_completions.ChatCompletionsUpstream`). ``tools=`` sets how it treats a request that carries ``tools``:

* ``"native"`` – answers from the queue (tool calls included): a model with tool support;
* ``"reject"`` – raises the upstream's "does not support tools" error without consuming a
  reply (``rejection=`` picks whose wording: ollama, llama-server, vllm, openrouter);
* ``"ignore"`` – answers from the queue, never with native tool calls.

:class:`FunctionUpstream` answers with a function of the request body instead.

Beside them, the helpers every kind of test shares: :class:`ServedApp` (the proxy on a real
uvicorn, in a thread or on the running loop), :mod:`~toolshim.testing.processes` (a free
port, a child process awaited until it answers, ``toolshim serve`` as one),
:func:`read_sse` (one reader for every protocol's stream) and the ``get_weather`` tool in
each protocol's shape (:mod:`~toolshim.testing.tools`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolshim.errors import UpstreamError, UpstreamStatusError
from toolshim.testing.processes import (
    FakeUpstreamProcess,
    Process,
    free_port,
    start_fake_upstream,
    start_process,
    start_serve,
)
from toolshim.testing.proxy import ServedApp
from toolshim.testing.sse import SSEEvent, read_sse
from toolshim.testing.tools import (
    CALL_JSON,
    WEATHER,
    WEATHER_ANTHROPIC,
    WEATHER_FUNCTION,
    WEATHER_RESPONSES,
)
from toolshim.upstreams._http import completion_as_chunks
from toolshim.upstreams.chat_completions import ChatCompletionsUpstream

__all__ = [
    "CALL_JSON",
    "REJECTION_MESSAGES",
    "WEATHER",
    "WEATHER_ANTHROPIC",
    "WEATHER_FUNCTION",
    "WEATHER_RESPONSES",
    "CompletionUpstream",
    "FakeUpstream",
    "FakeUpstreamProcess",
    "FunctionUpstream",
    "Process",
    "Reply",
    "SSEEvent",
    "ServedApp",
    "call",
    "free_port",
    "opening_logprobs",
    "prefilling",
    "read_sse",
    "rejection_error",
    "start_fake_upstream",
    "start_process",
    "start_serve",
]

REJECTION_MESSAGES: dict[str, tuple[int, str]] = {
    "ollama": (400, "registry.ollama.ai/library/{model} does not support tools"),
    "llama-server": (500, "tools param requires --jinja flag"),
    "vllm": (
        400,
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ),
    "openrouter": (
        404,
        "No endpoints found that support tool use. To learn more about "
        "provider routing, visit: https://openrouter.ai/docs/provider-routing",
    ),
}


def rejection_error(kind: str = "ollama", model: str = "fake-model") -> UpstreamStatusError:
    """The error a real server of ``kind`` raises for a request with tools it cannot take."""
    status, text = REJECTION_MESSAGES[kind]
    message = text.format(model=model)
    return UpstreamStatusError(message, status=status, body={"error": {"message": message}})


def call(
    name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
) -> dict[str, Any]:
    """A native tool call in OpenAI shape, for :class:`Reply`."""
    return {
        "id": id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments or {})},
    }


@dataclass
class Reply:
    """A scripted answer: text and/or native tool calls."""

    content: str | None = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    logprobs: list[dict[str, Any]] | None = None
    """The choice's ``logprobs.content`` entries (see :func:`opening_logprobs`)."""

    def completion(self, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        prompt = 10
        completion_tokens = max(1, len(self.content or "") // 4)
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if self.logprobs is not None:
            choice["logprobs"] = {"content": self.logprobs}
        return {
            "id": f"chatcmpl-fake-{uuid.uuid4().hex[:8]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": self.usage
            or {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
            },
        }


def prefilling(answer: str, continued: str, seen: list[dict[str, Any]]) -> Handler:
    """A :class:`FunctionUpstream` handler that answers like llama.cpp: ``answer``, or, handed
    an assistant message to continue, that message followed by ``continued``; each body it is
    sent is appended to ``seen``."""

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        last = body["messages"][-1]
        return last["content"] + continued if last["role"] == "assistant" else answer

    return reply


def opening_logprobs(token: str, alternatives: Mapping[str, float]) -> list[dict[str, Any]]:
    """A ``logprobs.content`` list for a reply whose first token is ``token``, with
    ``alternatives`` (token → probability) as that token's ``top_logprobs``."""
    top = [
        {"token": text, "logprob": math.log(p), "bytes": list(text.encode())}
        for text, p in alternatives.items()
    ]
    logprob = math.log(alternatives[token]) if token in alternatives else -10.0
    return [
        {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": top}
    ]


ScriptItem = str | Reply | Mapping[str, Any] | BaseException


def _as_completion(item: ScriptItem, model: str) -> dict[str, Any]:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, str):
        return Reply(item).completion(model)
    if isinstance(item, Reply):
        return item.completion(model)
    return dict(item)


def stream_chunks(completion: Mapping[str, Any], *, piece: int = 7) -> list[dict[str, Any]]:
    """A completion as stream chunks, its text cut into ``piece``-character deltas."""
    chunks = completion_as_chunks(completion)
    out: list[dict[str, Any]] = []
    for chunk in chunks:
        choices = chunk.get("choices") or []
        delta = choices[0]["delta"] if choices else {}
        text = delta.get("content")
        if not isinstance(text, str) or len(text) <= piece:
            out.append(chunk)
            continue
        finish = choices[0].get("finish_reason")
        pieces = [text[i : i + piece] for i in range(0, len(text), piece)]
        for j, part in enumerate(pieces):
            d: dict[str, Any] = {"content": part}
            if j == 0:
                d["role"] = delta.get("role", "assistant")
            if j == len(pieces) - 1 and delta.get("tool_calls"):
                d["tool_calls"] = delta["tool_calls"]
            piece_choice: dict[str, Any] = {
                "index": 0,
                "delta": d,
                "finish_reason": finish if j == len(pieces) - 1 else None,
            }
            if j == 0 and choices[0].get("logprobs") is not None:
                piece_choice["logprobs"] = choices[0]["logprobs"]  # all of it on the first piece
            out.append({**chunk, "choices": [piece_choice]})
    return out


def requested_chunks(
    completion: Mapping[str, Any], body: Mapping[str, Any], *, piece: int = 7
) -> list[dict[str, Any]]:
    """:func:`stream_chunks` as a server answers the request ``body``: the usage-only chunk
    only where it asked for it (``stream_options.include_usage``)."""
    usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))
    return [
        chunk
        for chunk in stream_chunks(completion, piece=piece)
        if usage_wanted or "usage" not in chunk or chunk.get("choices")
    ]


class CompletionUpstream(ChatCompletionsUpstream):
    """A fake chat-completions server that answers each request with one whole completion
    (:meth:`_produce`), streamed as :func:`requested_chunks` paced by :meth:`_pacing`."""

    async def _produce(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _pacing(self) -> tuple[int, float]:
        """The characters of text a streamed chunk carries, and the seconds between chunks."""
        raise NotImplementedError

    async def complete_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        return await self._produce(body, headers)

    async def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        completion = await self._produce(body, headers)
        piece, delay = self._pacing()
        for i, chunk in enumerate(requested_chunks(completion, body, piece=piece)):
            if i and delay:
                await asyncio.sleep(delay)
            yield chunk


class FakeUpstream(CompletionUpstream):
    """A scripted model server (see the module docstring)."""

    def __init__(
        self,
        replies: Iterable[ScriptItem] = (),
        *,
        tools: Literal["native", "reject", "ignore"] = "native",
        rejection: str = "ollama",
        key: str = "fake://upstream",
        models: Iterable[str] = ("fake-model",),
        piece: int = 7,
    ) -> None:
        self.queue: list[ScriptItem] = list(replies)
        self.tools = tools
        self.rejection = rejection
        self._key = key
        self.models = list(models)
        self.piece = piece
        self.history: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.closed = False

    @property
    def key(self) -> str:
        return self._key

    def enqueue(self, *replies: ScriptItem) -> FakeUpstream:
        self.queue.extend(replies)
        return self

    @property
    def calls(self) -> int:
        """How many chat requests were sent (rejected ones included)."""
        return len(self.history)

    async def _produce(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None
    ) -> dict[str, Any]:
        """Record the request, reject it where tools are scripted to be rejected, else answer
        it with :meth:`_reply`."""
        self.history.append(json.loads(json.dumps(body)))
        self.headers.append(dict(headers or {}))
        model = str(body.get("model") or self.models[0])
        if body.get("tools") and self.tools == "reject":
            raise rejection_error(self.rejection, model)
        return await self._reply(body, model)

    async def _reply(self, body: Mapping[str, Any], model: str) -> dict[str, Any]:
        """The next scripted reply, as a completion."""
        if not self.queue:
            raise UpstreamError(f"FakeUpstream has no reply left for request #{len(self.history)}")
        completion = _as_completion(self.queue.pop(0), model)
        if self.tools == "ignore" or not body.get("tools"):
            for choice in completion.get("choices", []):
                message = choice.get("message") or {}
                if message.get("tool_calls"):
                    raise AssertionError(
                        "FakeUpstream was scripted to return native tool calls for a request "
                        "without tools (or with tools='ignore')"
                    )
        return completion

    def _pacing(self) -> tuple[int, float]:
        return self.piece, 0.0

    async def list_models(self, *, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "owned_by": "fake"} for m in self.models],
        }

    async def aclose(self) -> None:
        self.closed = True


Handler = Callable[[dict[str, Any]], ScriptItem | Awaitable[ScriptItem]]


class FunctionUpstream(FakeUpstream):
    """An upstream whose answer is ``handler(body)`` (sync or async), e.g. to echo the prompt."""

    def __init__(self, handler: Handler, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handler = handler

    async def _reply(self, body: Mapping[str, Any], model: str) -> dict[str, Any]:
        result = self.handler(json.loads(json.dumps(body)))
        if inspect.isawaitable(result):
            result = await result
        return _as_completion(result, model)

    async def stream_body(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        completion = await self._produce(body, headers)
        for chunk in stream_chunks(completion, piece=self.piece):
            yield chunk
