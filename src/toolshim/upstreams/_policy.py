"""How long to wait for an upstream and when to try again: deadlines and the retry loop.

Three deadlines bound every upstream request, each reported by name when it passes
(:class:`~toolshim.errors.UpstreamTimeoutError`, 504): ``connect`` (making the connection),
``read`` (the longest silence between two reads, the first byte of the answer included) and
``total`` (the whole request, retries and a stream's last byte included: an upstream that
drips a byte a second ends there).

Retries are made only where they are safe: the request never reached the upstream (a refused
connection, a failed lookup, a connect timeout), or the upstream answered 502 or 503 — in
both cases before any of the reply was read, so never once a stream has begun. The wait
between tries grows from ``backoff`` seconds (doubling, at most ``max_backoff``) with full
jitter; an upstream's ``Retry-After`` is honoured, and one asking for longer than
``max_retry_after`` or past the total deadline ends the retries at once.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_RETRIES",
    "DEFAULT_TOTAL_TIMEOUT",
    "NO_RETRIES",
    "Deadlines",
    "RetryPolicy",
    "retry_after_seconds",
    "with_retries",
]

log = logging.getLogger("toolshim.upstreams")

DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection to the upstream."""
DEFAULT_TOTAL_TIMEOUT = 1800.0
"""Seconds one upstream request may take in all (30 minutes: a long reply from a CPU model)."""
DEFAULT_RETRIES = 2
"""Further tries after a connect failure or a 502/503 answer."""
RETRIED_STATUSES = frozenset({502, 503})

T = TypeVar("T")

Deadline = Literal["connect", "read", "total"]
_TIMEOUT_MESSAGES: dict[Deadline, str] = {
    "connect": "could not connect to the upstream at {url} within the connect timeout of {seconds}",
    "read": "the upstream at {url} sent nothing for {seconds} (the read timeout)",
    "total": "the upstream at {url} did not finish within the total timeout of {seconds}",
}


@dataclass(frozen=True)
class Deadlines:
    """The connect, read and total deadlines of upstream requests, in seconds (None: none)."""

    connect: float | None = DEFAULT_CONNECT_TIMEOUT
    read: float | None = 600.0
    total: float | None = DEFAULT_TOTAL_TIMEOUT

    def start(self) -> float | None:
        """The loop time at which a request started now must be over (None: never)."""
        return None if self.total is None else asyncio.get_running_loop().time() + self.total

    def error(self, deadline: Deadline, url: str) -> UpstreamTimeoutError:
        """The error of a request to ``url`` that ran past ``deadline``, naming its length."""
        seconds: float | None = getattr(self, deadline)
        return UpstreamTimeoutError(
            _TIMEOUT_MESSAGES[deadline].format(url=url, seconds=_seconds(seconds)),
            url=url,
            deadline=deadline,
            seconds=seconds,
        )

    @asynccontextmanager
    async def bound(self, deadline: float | None, url: str) -> AsyncIterator[None]:
        """Run the block until ``deadline`` (loop time); past it, the total-timeout error.

        Enter it around each await, never around a ``yield``: the timeout cancels the task
        that is running the block.
        """
        if deadline is None:
            yield
            return
        scope = asyncio.timeout_at(deadline)
        try:
            async with scope:
                yield
        except TimeoutError as exc:
            if scope.expired():
                raise self.error("total", url) from exc
            raise


def _seconds(value: float | None) -> str:
    return "(none)" if value is None else f"{value:g}s"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed upstream request is tried again."""

    retries: int = DEFAULT_RETRIES
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    """How to wait (tests pass one that records the waits)."""

    def retryable(self, exc: UpstreamError) -> bool:
        if isinstance(exc, UpstreamConnectionError):
            return not exc.sent
        if isinstance(exc, UpstreamTimeoutError):
            return exc.deadline == "connect"
        return isinstance(exc, UpstreamStatusError) and exc.status in RETRIED_STATUSES

    def wait(self, attempt: int, exc: UpstreamError) -> float | None:
        """Seconds to wait before try ``attempt + 1`` (None: do not retry)."""
        if attempt > self.retries or not self.retryable(exc):
            return None
        pause = random.uniform(0, min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
        if isinstance(exc, UpstreamStatusError) and exc.retry_after is not None:
            asked = retry_after_seconds(exc.retry_after)
            if asked is not None:
                if asked > self.max_retry_after:
                    return None
                pause = max(pause, asked)
        return pause


NO_RETRIES = RetryPolicy(retries=0)
"""One try only."""


def retry_after_seconds(value: str) -> float | None:
    """A ``Retry-After`` header (seconds, or an HTTP date) in seconds from now; None if unreadable."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline: float | None,
    url: str,
) -> T:
    """``attempt()``, tried again as ``policy`` allows while the total ``deadline`` leaves time."""
    tries = 1
    while True:
        try:
            return await attempt()
        except UpstreamError as exc:
            pause = policy.wait(tries, exc)
            late = deadline is not None and pause is not None
            if late and asyncio.get_running_loop().time() + (pause or 0.0) >= (deadline or 0.0):
                pause = None
            if pause is None:
                if tries > 1:
                    exc.args = (f"{exc.message} (after {tries} tries)", *exc.args[1:])
                raise
            log.warning(
                "upstream %s: %s; try %d of %d in %.2fs",
                url,
                exc.message,
                tries + 1,
                policy.retries + 1,
                pause,
            )
            await policy.sleep(pause)
            tries += 1
