"""The one exception tree of toolshim, each error with its HTTP status (no wire JSON here).

::

    ToolshimError
    ├── ConfigError                  a bad mode, strategy, dialect or option (a programming error)
    ├── InvalidRequestError          the caller's request is malformed               → 400
    ├── AuthenticationError          no valid proxy access key (--auth-keys)         → 401
    ├── LimitExceededError           over one of the proxy's limits  → 413, 429, 408, 431, 503
    ├── ShuttingDownError            the server stopped before the request was served → 503
    ├── UpstreamError                anything that went wrong talking to the upstream
    │   ├── UpstreamStatusError      the upstream answered with an HTTP error        → its status
    │   ├── UpstreamConnectionError  the upstream could not be reached               → 502
    │   ├── UpstreamTimeoutError     the connect, read or total deadline passed      → 504
    │   └── UpstreamProtocolError    the upstream answered with something unreadable → 502
    │       └── UpstreamIncompleteError  the reply was cut off before its end         → 502
    ├── ToolCallError                the model never produced a valid tool call      → 502
    ├── StoreError                   the capability store could not be used
    ├── LocalModelError              the embedded local model cannot be set up or started
    ├── MCPServerError               an MCP server failed to start, crashed, hung or refused
    └── AgentLimitError              an agent run hit a safeguard and raise_on_limit was set

Every error knows its HTTP status and its ``type``/``code`` labels; each protocol's codec
writes them in its own error shape (OpenAI ``{"error": {...}}``, Anthropic
``{"type": "error", ...}``). An error that ends a turn the engine had
started carries that turn's ``toolshim`` metadata in ``meta`` (the proxy sends it beside
``error``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolshim.types import Metadata

__all__ = [
    "AgentLimitError",
    "AuthenticationError",
    "ConfigError",
    "InvalidRequestError",
    "LimitExceededError",
    "LocalModelError",
    "MCPServerError",
    "ShuttingDownError",
    "StoreError",
    "ToolCallError",
    "ToolshimError",
    "UpstreamConnectionError",
    "UpstreamError",
    "UpstreamIncompleteError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "upstream_error_fields",
]


class ToolshimError(Exception):
    """Base of every error toolshim raises on purpose."""

    status: int = 500
    error_type: str = "toolshim_error"
    code: str | None = None
    param: str | None = None
    meta: Metadata | None = None
    """The ``toolshim`` metadata of the turn that failed (set by the engine once a turn had
    started: its mode, LLM calls and re-asks so far); None for errors raised before that."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else type(self).__name__


class ConfigError(ToolshimError, ValueError):
    """A mode, strategy, dialect or other option that toolshim does not know."""

    status = 400
    error_type = "invalid_request_error"
    code = "invalid_option"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class InvalidRequestError(ToolshimError, ValueError):
    """The caller's chat-completions request is malformed."""

    status = 400
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code


class UpstreamError(ToolshimError):
    """Something went wrong while talking to the upstream model server."""

    status = 502
    error_type = "upstream_error"

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an HTTP error; its status, body and message are kept."""

    error_type = "upstream_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: Any = None,
        url: str | None = None,
        upstream_type: str | None = None,
        upstream_code: str | None = None,
        upstream_param: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.retry_after = retry_after
        """The upstream's ``Retry-After`` header (rate limits, overload), passed on to callers."""
        self.status = status
        self.body = body
        self.upstream_message = message
        if upstream_type:
            self.error_type = upstream_type
        self.code = upstream_code
        self.param = upstream_param

    @property
    def context_overflow(self) -> bool:
        """The upstream refused the request as longer than the model's context window
        (llama-server's ``exceed_context_size_error``, OpenAI's and vLLM's
        ``context_length_exceeded`` or their wording)."""
        if self.status not in (400, 413, 422, 500):
            return False
        labels = f"{self.error_type} {self.code or ''}".lower()
        if "exceed_context_size" in labels or "context_length_exceeded" in labels:
            return True
        text = self.upstream_message.lower()
        return any(words in text for words in _CONTEXT_WORDS)

    def with_context_hint(self, hint: str) -> UpstreamStatusError:
        """This error, when it is a :attr:`context_overflow`, with ``hint`` (how to make room)
        after the upstream's message and OpenAI's ``context_length_exceeded`` code; any other
        error unchanged."""
        if not self.context_overflow or hint in self.upstream_message:
            return self
        error = UpstreamStatusError(
            f"{self.upstream_message.rstrip()} {hint}",
            status=400,
            body=self.body,
            url=self.url,
            upstream_type="invalid_request_error",
            upstream_code="context_length_exceeded",
            upstream_param="messages",
            retry_after=self.retry_after,
        )
        error.meta = self.meta
        return error


_CONTEXT_WORDS = (
    "exceeds the available context size",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
)


class UpstreamConnectionError(UpstreamError):
    """The upstream could not be reached (refused, DNS, reset).

    ``sent`` is False when the request never reached the upstream (no connection was made),
    which makes a retry safe.
    """

    status = 502
    code = "upstream_unreachable"

    def __init__(self, message: str, *, url: str | None = None, sent: bool = True) -> None:
        super().__init__(message, url=url)
        self.sent = sent


class UpstreamTimeoutError(UpstreamError):
    """The upstream did not answer within a deadline: ``deadline`` names which one
    (``connect``, ``read`` or ``total``) and ``seconds`` its length."""

    status = 504
    code = "upstream_timeout"

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        deadline: str | None = None,
        seconds: float | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.deadline = deadline
        self.seconds = seconds


class UpstreamProtocolError(UpstreamError):
    """The upstream answered, but not with a readable OpenAI-compatible body."""

    status = 502
    code = "upstream_bad_response"


class UpstreamIncompleteError(UpstreamProtocolError):
    """The upstream's reply stopped before its end (a stream with no finish and no ``[DONE]``,
    a body shorter than its framing): a truncated reply is never passed off as a whole one."""

    code = "upstream_incomplete"


class ToolCallError(ToolshimError):
    """The model did not produce a valid tool call within the allowed re-asks."""

    status = 502
    error_type = "tool_call_error"
    code = "tool_call_retries_exhausted"

    def __init__(self, message: str, *, problems: Sequence[str] = (), attempts: int = 0) -> None:
        super().__init__(message)
        self.problems = tuple(problems)
        self.attempts = attempts


class StoreError(ToolshimError):
    """The capability store could not be opened, read or written."""

    error_type = "store_error"


class LocalModelError(ToolshimError):
    """The embedded model could not be assembled, found or started (the message says how to fix it)."""

    status = 503
    error_type = "local_model_error"


class MCPServerError(ToolshimError):
    """An MCP server could not be started, crashed, did not answer in time (``timed_out``) or
    refused a request; an agent turns it into the call's error result, never its own end."""

    status = 502
    error_type = "mcp_server_error"

    def __init__(self, message: str, *, server: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.server = server
        self.timed_out = timed_out


class AgentLimitError(ToolshimError):
    """An agent run was stopped by a safeguard (``reason``: max_turns, loop, unknown_tool, a
    budget) and the caller asked for an exception, or a phase of an agent file answered with
    nothing for the next one (``empty_output``); ``result`` holds the run so far."""

    error_type = "agent_limit"

    def __init__(self, message: str, *, reason: str, result: Any = None) -> None:
        super().__init__(message)
        self.code = reason
        self.reason = reason
        self.result = result


class AuthenticationError(ToolshimError):
    """The request carries no valid access key for the proxy (``--auth-keys``)."""

    status = 401
    error_type = "invalid_request_error"
    code = "invalid_api_key"


class LimitExceededError(ToolshimError):
    """A request over one of the proxy's limits; ``limit`` names it (``body_size``,
    ``body_timeout``, ``concurrent_requests``, ``connections``, ...) and ``status`` is its
    HTTP status (413, 408, 429, 431, 503). ``retry_after`` (seconds, as text) is sent as the
    ``Retry-After`` header when the caller may try again."""

    error_type = "invalid_request_error"

    def __init__(
        self, message: str, *, limit: str, status: int, retry_after: str | None = None
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.code = limit
        self.status = status
        self.retry_after = retry_after
        if status == 429:
            self.error_type = "rate_limit_exceeded"


class ShuttingDownError(ToolshimError):
    """The server is shutting down and its drain time ran out before this request was served."""

    status = 503
    error_type = "server_error"
    code = "shutting_down"


def upstream_error_fields(body: Any) -> Mapping[str, Any]:
    """Pull ``message``/``type``/``code``/``param`` out of an upstream's error body, leniently.

    Handles the OpenAI shape ``{"error": {...}}``, Ollama's ``{"error": "text"}``, FastAPI's
    ``{"detail": ...}`` and a plain ``{"message": ...}``.
    """
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, str):
            return {"message": err}
        if isinstance(err, Mapping):
            message = err.get("message") or err.get("detail") or err.get("msg")
            if message is None and "detail" in body:
                message = body["detail"]
            fields: dict[str, Any] = {"message": _text(message) if message is not None else None}
            for key in ("type", "code", "param"):
                value = err.get(key)
                if value is not None:
                    fields[key] = str(value)
            return fields
    if isinstance(body, str) and body.strip():
        return {"message": body.strip()[:2000]}
    return {}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, ensure_ascii=False)
