"""``toolshim chat``: an interactive terminal client that swaps models and always says what their tools are."""

from toolshim.builtins import calculate, convert_units, current_time
from toolshim.chat.builtin import builtin_tools, load_tools
from toolshim.chat.session import ChatSession, ChatSettings
from toolshim.chat.status import ToolStatus, tool_status

__all__ = [
    "ChatSession",
    "ChatSettings",
    "ToolStatus",
    "builtin_tools",
    "calculate",
    "convert_units",
    "current_time",
    "load_tools",
    "tool_status",
]
