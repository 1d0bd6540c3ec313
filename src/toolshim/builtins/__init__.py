"""The built-in demo tools (``current_time``, ``calculate``, ``convert_units``): plain functions
that the chat and an agent file's bare tool names both use."""

from toolshim.builtins.functions import BUILTIN_FUNCTIONS, calculate, convert_units, current_time

__all__ = ["BUILTIN_FUNCTIONS", "calculate", "convert_units", "current_time"]
