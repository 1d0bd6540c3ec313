"""The proxy's limits (sizes, counts, deadlines) and the log that reports a limit once per burst."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolshim.errors import InvalidRequestError
from toolshim.types import ChatRequest

__all__ = ["LimitLog", "Limits"]

log = logging.getLogger("toolshim.server")

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Every bound the proxy puts on its clients; each is a ``toolshim serve`` flag.

    Sizes are bytes, times seconds; 0 (or None for ``max_connections``) switches a count
    limit off, never a deadline.
    """

    max_body_bytes: int = 16 * MIB
    """A request body above this gets a 413, as soon as its Content-Length or the bytes read
    so far exceed it (the body is never held whole before the check)."""
    max_header_bytes: int = 64 * 1024
    """Request line and headers above this get a 431 and the connection is closed."""
    header_timeout: float = 10.0
    """Seconds from a connection's (or a keep-alive request's) first byte to its last header."""
    body_timeout: float = 60.0
    """Seconds from the last header to the end of the body."""
    idle_timeout: float = 15.0
    """Seconds a keep-alive connection may sit idle between requests."""
    max_connections: int | None = 1000
    """Open client connections. At the limit, the connection that has waited longest for its
    headers (then the longest-idle keep-alive one) is closed to make room; when every
    connection is busy with a request, the new one gets a 503."""
    max_concurrent_requests: int = 256
    """Requests served at once (health and metrics excepted); beyond it a 429 with
    ``Retry-After``."""
    max_tools: int = 256
    """Tools in one request."""
    max_messages: int = 4096
    """Messages (or input items) in one request."""
    drain_timeout: float = 30.0
    """At shutdown, seconds in-flight requests get to finish; those still running are then
    answered with a 503 (a stream gets an error event)."""
    max_choices: int = 8
    """``n`` a request may ask for (each choice is a whole answer the upstream writes)."""
    max_output_tokens: int = 0
    """``max_tokens`` a request may ask for: more is lowered to it, with a warning (0: no cap)."""
    store_max_bytes: int = 1024 * MIB
    """Bytes of stored Responses API answers kept in all; the oldest of the caller holding the
    most are evicted first."""
    store_key_quota: int = 0
    """Bytes of stored answers one access key (or the anonymous caller) keeps; its oldest are
    evicted first (0: only ``store_max_bytes`` bounds a key)."""

    def response_store_bounds(self) -> dict[str, int | None]:
        """The Responses store's bounds (:class:`~toolshim.responses_store.ResponseStore`'s
        keyword arguments): a conversation read back is held to the request limits too."""
        return {
            "max_bytes": self.store_max_bytes or None,
            "key_quota": self.store_key_quota or None,
            "max_items": self.max_messages or None,
            "max_chain_bytes": self.max_body_bytes or None,
        }

    def bound_request(self, request: ChatRequest) -> tuple[ChatRequest, tuple[str, ...]]:
        """``request`` held to the operator's caps on what a caller may ask for: ``n`` above
        ``max_choices`` is an InvalidRequestError; ``max_tokens`` above ``max_output_tokens``
        is lowered (the warning says so)."""
        self.check_request(len(request.messages))
        params = request.params
        n = params.get("n")
        if self.max_choices and isinstance(n, int) and n > self.max_choices:
            raise InvalidRequestError(
                f"n={n} asks for more answers than this proxy gives at once "
                f"({self.max_choices}, --max-choices)",
                param="n",
            )
        cap = self.max_output_tokens
        lowered = {
            key: cap
            for key in ("max_tokens", "max_completion_tokens")
            if cap and isinstance(params.get(key), int) and params[key] > cap
        }
        if not lowered:
            return request, ()
        warning = (
            f"max_tokens {max(params[k] for k in lowered)} lowered to {cap}, this proxy's "
            "--max-output-tokens"
        )
        return replace(request, params={**params, **lowered}), (warning,)

    def check_request(self, messages: int) -> None:
        """InvalidRequestError when what goes upstream (stored history included) has more
        messages than allowed."""
        if self.max_messages and messages > self.max_messages:
            raise InvalidRequestError(
                f"the conversation has {messages} messages with the stored history added; this "
                f"proxy sends at most {self.max_messages} upstream (--max-messages)",
                param="messages",
                code="too_many_messages",
            )

    def check_payload(self, payload: Mapping[str, Any]) -> None:
        """InvalidRequestError when a decoded request has more tools or messages than allowed."""
        for field, limit, flag in (
            ("tools", self.max_tools, "--max-tools"),
            ("functions", self.max_tools, "--max-tools"),
            ("messages", self.max_messages, "--max-messages"),
            ("input", self.max_messages, "--max-messages"),
        ):
            items = payload.get(field)
            if limit and isinstance(items, list) and len(items) > limit:
                raise InvalidRequestError(
                    f"the request has {len(items)} {field}; this proxy accepts at most {limit} "
                    f"({flag})",
                    param=field,
                    code=f"too_many_{'tools' if flag == '--max-tools' else 'messages'}",
                )


class LimitLog:
    """Reports limit hits: the first hit of each limit at WARNING, then at most one line per
    ``window`` seconds saying how many more there were, so a flood of slow connections makes
    a few log lines, not one per connection. ``on_hit`` (e.g. a metrics counter) sees every hit."""

    def __init__(self, window: float = 10.0, on_hit: Callable[[str], None] | None = None) -> None:
        self.window = window
        self.on_hit = on_hit
        self._since: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def hit(self, limit: str, detail: str) -> None:
        """Count one hit of ``limit``; ``detail`` says what happened (logged when not muted)."""
        if self.on_hit is not None:
            self.on_hit(limit)
        now = time.monotonic()
        since = self._since.get(limit)
        if since is not None and now - since < self.window:
            self._suppressed[limit] = self._suppressed.get(limit, 0) + 1
            return
        more = self._suppressed.pop(limit, 0)
        self._since[limit] = now
        tail = f" ({more} more in the last {now - since:.0f}s)" if more and since else ""
        log.warning("limit %s hit: %s%s", limit, detail, tail)
