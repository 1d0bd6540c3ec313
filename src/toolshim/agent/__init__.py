"""Agents: Python functions as tools, and a loop that runs them for any model, native or emulated."""

from toolshim.agent.events import (
    AgentEvent,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from toolshim.agent.loop import Agent
from toolshim.agent.result import AgentResult, ToolRun, TurnRecord
from toolshim.agent.tools import CheckedArguments, Tool, ToolResult, tool

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentResult",
    "CheckedArguments",
    "RunFinished",
    "TextDelta",
    "Tool",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolResult",
    "ToolRun",
    "TurnFinished",
    "TurnRecord",
    "TurnStarted",
    "tool",
]
