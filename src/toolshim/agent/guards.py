"""The agent's safeguards: tool lookup, loop detection, and the answers given when a run is stopped.

Seed 003 stops a small model that calls the same tool again and again: once a call's result
has come back, the same call again ends the run with an answer built from that result. Here
"the same call" means the same tool with the same *normalised* arguments (validated, defaults
filled, keys sorted), so ``{"city": "Paris"}`` and ``{"units": "c", "city": "Paris"}`` match
when ``units`` defaults to ``"c"``. A call that raised may be retried once before it counts as
a loop. Unknown tool names are resolved tolerantly (``functions.`` prefixes, case drift) and
otherwise answered with an error that lists the real tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolshim.agent.result import ToolRun
from toolshim.agent.tools import CheckedArguments, Tool
from toolshim.dialects.interpret import ToolIndex
from toolshim.errors import ConfigError
from toolshim.types import ToolCall, ToolSpec

__all__ = [
    "CallLedger",
    "PlannedCall",
    "Toolbox",
    "call_signature",
    "limit_answer",
    "loop_answer",
    "plan_calls",
    "unknown_tool_answer",
    "unknown_tool_result",
]

PlanStatus = Literal["run", "unknown_tool", "invalid_arguments", "repeated"]


class Toolbox:
    """The agent's tools by name, with tolerant lookup of the names a model writes."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for item in tools:
            if item.name in self.tools:
                raise ConfigError(
                    f"two tools are named {item.name!r}; give one another name with tool(name=...)",
                    param="tools",
                )
            self.tools[item.name] = item
        self._index = ToolIndex([t.spec for t in self.tools.values()])

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    @property
    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def describe_names(self) -> str:
        return ", ".join(repr(n) for n in self.tools) or "(none)"

    def resolve(self, name: str) -> Tool | None:
        """The tool ``name`` means: exact, else despite prefixes and case drift, else None."""
        if name in self.tools:
            return self.tools[name]
        resolved = self._index.resolve(name)
        return self.tools.get(resolved) if resolved else None


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One call of a turn, looked up and checked, before anything runs."""

    call: ToolCall
    tool: Tool | None
    arguments: Any
    checked: CheckedArguments | None
    key: str
    status: PlanStatus
    earlier: ToolRun | None = None
    """For a repeated call: the run whose result already came back."""
    duplicate_of: int | None = None
    """For a second identical call in the same turn: the index of the first."""

    @property
    def name(self) -> str:
        return self.tool.name if self.tool else self.call.name


class CallLedger:
    """Every call whose result came back, by tool and normalised arguments."""

    def __init__(self) -> None:
        self._runs: dict[str, list[ToolRun]] = {}

    def record(self, key: str, run: ToolRun) -> None:
        self._runs.setdefault(key, []).append(run)

    def earlier(self, key: str) -> ToolRun | None:
        """The run that makes calling ``key`` again a loop (a raised error may be retried once)."""
        runs = [r for r in self._runs.get(key, ()) if r.status != "repeated"]
        if not runs:
            return None
        last = runs[-1]
        if last.status == "error" and sum(r.status == "error" for r in runs) < 2:
            return None
        return last


def decode_arguments(text: str) -> Any:
    """A call's arguments decoded from JSON; the text itself when it is not JSON."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def plan_calls(
    calls: Sequence[ToolCall], toolbox: Toolbox, ledger: CallLedger
) -> list[PlannedCall]:
    """Look up, check and classify the calls of one turn (nothing runs here)."""
    planned: list[PlannedCall] = []
    first_by_key: dict[str, int] = {}
    for call in calls:
        arguments = decode_arguments(call.arguments)
        tool = toolbox.resolve(call.name)
        if tool is None:
            key = f"?{call.name}:{call.arguments.strip()}"
            planned.append(PlannedCall(call, None, arguments, None, key, "unknown_tool"))
            continue
        checked = tool.check(arguments)
        key = f"{tool.name}:{checked.normalized}"
        earlier = ledger.earlier(key)
        status: PlanStatus
        if earlier is not None:
            status = "repeated"
        elif checked.ok:
            status = "run"
        else:
            status = "invalid_arguments"
        duplicate = first_by_key.get(key) if status == "run" else None
        if duplicate is None and status == "run":
            first_by_key[key] = len(planned)
        planned.append(PlannedCall(call, tool, arguments, checked, key, status, earlier, duplicate))
    return planned


def call_signature(name: str, arguments: Any, *, limit: int = 120) -> str:
    """``get_weather(city="Paris")``: a call as a person reads it."""
    if isinstance(arguments, dict):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    else:
        inner = str(arguments)
    if len(inner) > limit:
        inner = inner[: limit - 1] + "…"
    return f"{name}({inner})"


def unknown_tool_result(name: str, toolbox: Toolbox) -> str:
    """The tool result sent back for a call to a tool that does not exist: the re-ask."""
    return (
        f"Error: there is no tool named {name!r}. The available tools are "
        f"{toolbox.describe_names()}. Call one of them by its exact name, or answer in plain text."
    )


def unknown_tool_answer(names: Sequence[str], toolbox: Toolbox) -> str:
    """Seed 003's graceful answer when the model keeps calling tools that do not exist."""
    called = ", ".join(repr(n) for n in dict.fromkeys(names))
    return (
        f"I tried to use a tool called {called}, but it doesn't exist (the tools I have are "
        f"{toolbox.describe_names()}), so I could not finish this request with tools."
    )


def loop_answer(repeats: Sequence[PlannedCall]) -> str:
    """The answer built from the results the model asked for again (seed 003)."""
    lines = []
    for planned in repeats:
        earlier = planned.earlier
        if earlier is None:
            continue
        signature = call_signature(planned.name, planned.arguments)
        verb = "failed" if earlier.is_error else "returned"
        lines.append(f"{signature} {verb}: {earlier.result}")
    if len(lines) == 1:
        return lines[0]
    return "\n".join(f"- {line}" for line in lines)


def limit_answer(reason: str, last_runs: Sequence[ToolRun]) -> str:
    """The answer when a limit ends the run: what happened, and the latest useful results."""
    useful = [r for r in last_runs if r.status in ("ok", "repeated")]
    if not useful:
        return f"I stopped before reaching a final answer: {reason}."
    lines = [f"I stopped before reaching a final answer: {reason}. The latest tool results:"]
    lines += [f"- {call_signature(r.name, r.arguments)}: {r.result}" for r in useful]
    return "\n".join(lines)
