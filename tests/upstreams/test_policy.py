"""Deadlines and retries: which failures are tried again, how long between tries, when to stop."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable

import pytest

from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from toolshim.upstreams._policy import Deadlines, RetryPolicy, retry_after_seconds, with_retries


class Recorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def failing(*errors: UpstreamError) -> tuple[list[int], Callable[[], Awaitable[str]]]:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"

    return calls, attempt


def status(code: int, retry_after: str | None = None) -> UpstreamStatusError:
    return UpstreamStatusError("busy", status=code, retry_after=retry_after)


REFUSED = UpstreamConnectionError("refused", sent=False)


@pytest.mark.parametrize(
    "error",
    [REFUSED, status(502), status(503), UpstreamTimeoutError("slow", deadline="connect")],
    ids=["refused", "502", "503", "connect timeout"],
)
async def test_safe_failures_are_retried_until_it_works(error: UpstreamError) -> None:
    sleep = Recorder()
    calls, attempt = failing(error, error)
    assert await with_retries(attempt, RetryPolicy(sleep=sleep), deadline=None, url="u") == "ok"
    assert len(calls) == 3
    assert len(sleep.waits) == 2
    assert all(0 <= w <= 8.0 for w in sleep.waits)


@pytest.mark.parametrize(
    "error",
    [
        UpstreamConnectionError("reset after sending", sent=True),
        status(500),
        status(429, "1"),
        status(400),
        UpstreamTimeoutError("slow", deadline="read"),
    ],
    ids=["sent", "500", "429", "400", "read timeout"],
)
async def test_unsafe_failures_are_not_retried(error: UpstreamError) -> None:
    calls, attempt = failing(error)
    with pytest.raises(UpstreamError):
        await with_retries(attempt, RetryPolicy(sleep=Recorder()), deadline=None, url="u")
    assert len(calls) == 1


async def test_retries_stop_at_the_count_and_say_how_many_tries() -> None:
    calls, attempt = failing(*[status(503)] * 5)
    with pytest.raises(UpstreamStatusError, match=r"busy \(after 3 tries\)") as caught:
        await with_retries(attempt, RetryPolicy(sleep=Recorder()), deadline=None, url="u")
    assert len(calls) == 3
    assert caught.value.status == 503


async def test_retry_after_is_honoured() -> None:
    sleep = Recorder()
    _, attempt = failing(status(503, "3"))
    policy = RetryPolicy(sleep=sleep, backoff=0.01)
    assert await with_retries(attempt, policy, deadline=None, url="u") == "ok"
    assert sleep.waits == [3.0]


async def test_a_retry_after_too_long_or_past_the_deadline_ends_the_retries() -> None:
    calls, attempt = failing(status(503, "120"))
    with pytest.raises(UpstreamStatusError):
        await with_retries(attempt, RetryPolicy(sleep=Recorder()), deadline=None, url="u")
    assert len(calls) == 1
    calls, attempt = failing(status(503, "5"))
    deadline = asyncio.get_running_loop().time() + 1.0
    with pytest.raises(UpstreamStatusError):
        await with_retries(attempt, RetryPolicy(sleep=Recorder()), deadline=deadline, url="u")
    assert len(calls) == 1


async def test_zero_retries_tries_once() -> None:
    calls, attempt = failing(REFUSED)
    with pytest.raises(UpstreamConnectionError):
        await with_retries(attempt, RetryPolicy(retries=0), deadline=None, url="u")
    assert len(calls) == 1


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(" 0 ") == 0.0
    assert retry_after_seconds("soon") is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_seconds(later) or 0) <= 31
    assert retry_after_seconds("Mon, 01 Jan 2001 00:00:00 GMT") == 0.0


async def test_the_total_deadline_is_named_when_it_passes() -> None:
    deadlines = Deadlines(connect=1, read=2, total=0.05)
    with pytest.raises(UpstreamTimeoutError, match=r"total timeout of 0\.05s") as caught:
        async with deadlines.bound(deadlines.start(), "http://h/v1"):
            await asyncio.sleep(10)
    assert caught.value.deadline == "total"
    assert caught.value.status == 504


async def test_another_timeout_inside_the_bound_is_left_alone() -> None:
    deadlines = Deadlines(total=10)
    with pytest.raises(TimeoutError) as caught:
        async with deadlines.bound(deadlines.start(), "u"):
            raise TimeoutError("the read timeout")
    assert not isinstance(caught.value, UpstreamTimeoutError)
