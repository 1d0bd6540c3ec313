"""Names of coding agents' own tools, as toolshim's coding-agent steps recognise them."""

from __future__ import annotations

__all__ = ["SHELL_TOOLS"]

SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "run_command", "run_shell_command"})
"""Tools that run a shell command (lower-cased): Claude Code's ``Bash``, Codex's
``exec_command`` and ``shell``, and the usual names of other agents."""
