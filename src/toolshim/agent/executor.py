"""Running the calls of one turn: concurrently, each failure turned into an error result.

Async tools run on the event loop, sync tools in worker threads (``asyncio.to_thread``), all
calls of a turn at once. A tool that raises does not end the run: the model gets
``Error: <Type>: <message>`` as the result and can react; a tool that returns a
:class:`~toolshim.agent.tools.ToolResult` with ``is_error`` (an MCP tool's ``isError``) gets
``Error: <its text>``, status ``error`` and error type ``ToolError``. Calls that must not run (unknown
tool, invalid arguments, repeated) get their result without calling anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic_core import to_json

from toolshim.agent.guards import PlannedCall, Toolbox, unknown_tool_result
from toolshim.agent.result import ToolRun
from toolshim.agent.tools import ToolResult

__all__ = ["error_text", "execute", "not_run", "result_text"]

log = logging.getLogger("toolshim.agent")


def result_text(value: Any) -> str:
    """A tool's return value as the text the model reads (strings as they are, a ToolResult's
    text, the rest as JSON)."""
    if isinstance(value, ToolResult):
        return value.model_text
    if isinstance(value, str):
        return value
    return to_json(value, fallback=str).decode("utf-8")


def error_text(exc: BaseException) -> str:
    message = str(exc).strip()
    return f"Error: {type(exc).__name__}: {message}" if message else f"Error: {type(exc).__name__}"


def not_run(planned: PlannedCall, turn: int, reason: str) -> ToolRun:
    """The record of a call that was not run because the run stopped."""
    return ToolRun(
        planned.call.id,
        planned.name,
        planned.arguments,
        f"Not run: {reason}.",
        status="not_run",
        turn=turn,
    )


def settled(planned: PlannedCall, turn: int, toolbox: Toolbox) -> ToolRun | None:
    """The result of a call that is answered without running anything (None: it must run)."""
    call = planned.call
    if planned.status == "unknown_tool":
        return ToolRun(
            call.id,
            call.name,
            planned.arguments,
            unknown_tool_result(call.name, toolbox),
            status="unknown_tool",
            turn=turn,
        )
    if planned.status == "invalid_arguments":
        problem = planned.checked.problem if planned.checked else "invalid arguments"
        return ToolRun(
            call.id,
            planned.name,
            planned.arguments,
            f"Error: {problem}. Call {planned.name!r} again with corrected arguments.",
            status="invalid_arguments",
            error_type="ValidationError",
            turn=turn,
        )
    if planned.status == "repeated" and planned.earlier is not None:
        return ToolRun(
            call.id,
            planned.name,
            planned.arguments,
            f"(Not run again: {planned.name!r} was already called with these arguments; its "
            f"result was:) {planned.earlier.result}",
            status="repeated",
            value=planned.earlier.value,
            error_type=planned.earlier.error_type,
            turn=turn,
        )
    return None


async def run_call(planned: PlannedCall, turn: int, time_limit: float | None) -> ToolRun:
    """Run one checked call; its exception becomes an error result (cancellation propagates)."""
    tool, checked, call = planned.tool, planned.checked, planned.call
    if tool is None or checked is None:
        raise ValueError(f"call {call.id!r} to {call.name!r} is not runnable")
    started = time.perf_counter()
    try:
        async with asyncio.timeout(time_limit):
            value = await tool.invoke(checked)
    except TimeoutError as exc:
        duration = time.perf_counter() - started
        log.warning("tool %r timed out after %.1fs", tool.name, duration)
        return ToolRun(
            call.id,
            tool.name,
            planned.arguments,
            f"Error: TimeoutError: {tool.name!r} did not finish within {time_limit} s",
            status="error",
            value=exc,
            error_type="TimeoutError",
            duration=duration,
            turn=turn,
        )
    except Exception as exc:  # a tool's failure is the model's information, not the run's end
        duration = time.perf_counter() - started
        log.info("tool %r raised %s: %s", tool.name, type(exc).__name__, exc)
        return ToolRun(
            call.id,
            tool.name,
            planned.arguments,
            error_text(exc),
            status="error",
            value=exc,
            error_type=type(exc).__name__,
            duration=duration,
            turn=turn,
        )
    duration = time.perf_counter() - started
    if isinstance(value, ToolResult) and value.is_error:
        log.info("tool %r reported an error: %s", tool.name, value.model_text)
        return ToolRun(
            call.id,
            tool.name,
            planned.arguments,
            f"Error: {value.model_text.strip() or 'the tool reported an error'}",
            status="error",
            value=value,
            error_type="ToolError",
            duration=duration,
            turn=turn,
        )
    return ToolRun(
        call.id,
        tool.name,
        planned.arguments,
        result_text(value),
        value=value,
        duration=duration,
        turn=turn,
    )


async def execute(
    planned: Sequence[PlannedCall],
    turn: int,
    toolbox: Toolbox,
    *,
    time_limit: float | None = None,
) -> AsyncIterator[tuple[int, ToolRun]]:
    """Yield ``(index, run)`` for every call as its result is ready; runnable calls run at once.

    A second identical call in the same turn shares the first one's run. If the consumer stops
    early, calls still running are cancelled.
    """
    tasks: list[asyncio.Task[tuple[int, ToolRun]]] = []
    waiting: dict[int, list[int]] = {}
    for index, item in enumerate(planned):
        done = settled(item, turn, toolbox)
        if done is not None:
            yield index, done
        elif item.duplicate_of is not None:
            waiting.setdefault(item.duplicate_of, []).append(index)
        else:
            tasks.append(asyncio.ensure_future(_indexed(index, item, turn, time_limit)))
    try:
        for next_done in asyncio.as_completed(tasks):
            index, run = await next_done
            yield index, run
            for twin in waiting.get(index, ()):
                yield twin, _shared(run, planned[twin], turn)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()


async def _indexed(
    index: int, planned: PlannedCall, turn: int, time_limit: float | None
) -> tuple[int, ToolRun]:
    return index, await run_call(planned, turn, time_limit)


def _shared(run: ToolRun, planned: PlannedCall, turn: int) -> ToolRun:
    return ToolRun(
        planned.call.id,
        run.name,
        planned.arguments,
        run.result,
        status=run.status,
        value=run.value,
        error_type=run.error_type,
        turn=turn,
    )
