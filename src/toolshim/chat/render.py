"""What the chat prints: streamed text, tool calls and their results, notices, tables (rich)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolshim.agent.guards import call_signature
from toolshim.agent.result import AgentResult, ToolRun
from toolshim.agent.tools import Tool
from toolshim.chat.status import ToolStatus

__all__ = ["Renderer", "summarize_parameters"]

_RESULT_PREVIEW = 160
_STATUS_STYLE = {"native": "green", "emulated": "cyan", "disabled": "red", "native first": "yellow"}


class Renderer:
    """Prints to ``console``, keeping track of whether a streamed line is still open."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._open_line = False
        self._resume = False
        """A notice cut a streamed line: the text that follows starts with "… "."""

    # -- streaming --------------------------------------------------------------------------

    def text(self, delta: str) -> None:
        """A piece of the model's answer, printed as it arrives."""
        if not delta:
            return
        if self._resume:
            self._resume = False
            self.console.print("[dim]…[/] ", end="")
        self.console.out(delta, end="", highlight=False)
        self.console.file.flush()
        self._open_line = not delta.endswith("\n")

    def end_line(self) -> None:
        """Finish a streamed line so that the next output starts at the left margin."""
        self._resume = False
        if self._open_line:
            self.console.out("")
            self._open_line = False

    def tool_started(self, name: str, arguments: Any) -> None:
        self.end_line()
        self.console.print(f"  [cyan]⚙[/] {escape(call_signature(name, arguments))}")

    def tool_finished(self, run: ToolRun) -> None:
        self.end_line()
        result = " ".join(run.result.split())
        if len(result) > _RESULT_PREVIEW:
            result = result[: _RESULT_PREVIEW - 1] + "…"
        if run.status == "ok":
            mark = "[green]✓[/]"
        elif run.status == "repeated":
            mark = "[yellow]↺[/]"
        else:
            mark = "[red]✗[/]"
        timing = f" [dim]({run.duration:.2f} s)[/]" if run.ran else f" [dim]({run.status})[/]"
        self.console.print(f"    {mark} {escape(run.name)} → {escape(result)}{timing}")

    def footer(self, result: AgentResult, seconds: float) -> None:
        """One dim line after an answer: how it was served (native or emulated), calls, time."""
        metas = result.metadata
        emulated = [m for m in metas if m.emulated]
        if emulated:
            how = f"emulated ({emulated[-1].dialect})" if emulated[-1].dialect else "emulated"
        elif result.tool_runs or any(m.llm_calls for m in metas):
            how = "native"
        else:
            how = "no tools"
        calls = sum(m.llm_calls for m in metas)
        reasks = sum(m.reasks for m in metas)
        parts = [how, f"{calls} LLM call{'s' if calls != 1 else ''}"]
        if result.tool_runs:
            runs = len(result.tool_runs)
            parts.append(f"{runs} tool call{'s' if runs != 1 else ''}")
        if reasks:
            parts.append(f"{reasks} re-ask{'s' if reasks != 1 else ''}")
        parts.append(f"{seconds:.1f} s")
        self.end_line()
        self.console.print(f"[dim]\\[{escape(' · '.join(parts))}][/]")

    # -- messages ---------------------------------------------------------------------------

    def notice(self, text: str, style: str = "yellow") -> None:
        cut = self._open_line
        self.end_line()
        self.console.print(f"[{style}]{escape(text)}[/]")
        self._resume = cut

    def info(self, text: str) -> None:
        self.end_line()
        self.console.print(escape(text))

    def error(self, text: str, hint: str | None = None) -> None:
        self.end_line()
        self.console.print(f"[red]error:[/] {escape(text)}")
        if hint:
            self.console.print(f"[dim]hint: {escape(hint)}[/]")

    def model_status(self, lead: str, model: str, status: ToolStatus) -> None:
        """``Switched to gemma3:1b. Tools: emulated (json) — from profile gemma3``."""
        self.end_line()
        style = _STATUS_STYLE.get(status.kind, "white")
        self.console.print(
            f"{escape(lead)} [bold]{escape(model)}[/]. [{style}]{escape(status.headline)}[/]"
            f" — {escape(status.why)}"
        )

    # -- tables -----------------------------------------------------------------------------

    def models_table(self, title: str, rows: Iterable[Mapping[str, str]]) -> None:
        table = Table(title=title, title_justify="left")
        for column in ("", "model", "tools", "native_tools", "source", "learned"):
            table.add_column(column)
        for row in rows:
            style = _STATUS_STYLE.get(row["kind"], "white")
            table.add_row(
                row["current"],
                escape(row["model"]),
                f"[{style}]{escape(row['tools'])}[/]",
                escape(row["native_tools"]),
                escape(row["source"]),
                escape(row["learned"]),
            )
        self.console.print(table)

    def tools_table(self, tools: Sequence[Tool]) -> None:
        if not tools:
            self.info("No tools loaded (--no-builtin-tools and no --tools).")
            return
        table = Table(title=f"{len(tools)} tools", title_justify="left")
        for column in ("tool", "arguments", "description"):
            table.add_column(column)
        for tool in tools:
            description = tool.description.strip().split("\n\n")[0]
            if len(description) > 100:
                description = description[:99] + "…"
            table.add_row(
                escape(tool.name),
                escape(summarize_parameters(tool.parameters)),
                escape(" ".join(description.split())),
            )
        self.console.print(table)

    def mcp_table(self, servers: Sequence[Mapping[str, Any]]) -> None:
        """The MCP servers: name, state (and why one is down), restarts, tools."""
        table = Table(title=f"{len(servers)} MCP server(s)", title_justify="left")
        for column in ("server", "state", "tools", "started from"):
            table.add_column(column)
        for server in servers:
            state = str(server["state"])
            if server.get("problem"):
                state += f": {server['problem']}"
            if server.get("restarts"):
                state += f" (restarted {server['restarts']}×)"
            tools = ", ".join(server["tools"]) or "(none)"
            table.add_row(
                escape(str(server["name"])),
                escape(state),
                escape(tools),
                escape(str(server["server"])),
            )
        self.console.print(table)


def summarize_parameters(schema: Mapping[str, Any]) -> str:
    """``expression: string; timezone?: string = 'local'``: a JSON Schema in one line."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = spec.get("type")
        if isinstance(kind, list):
            kind = " | ".join(str(k) for k in kind)
        if "enum" in spec:
            kind = " | ".join(repr(v) for v in spec["enum"])
        text = f"{name}{'' if name in required else '?'}: {kind or 'any'}"
        if "default" in spec:
            text += f" = {spec['default']!r}"
        parts.append(text)
    return "; ".join(parts) or "(none)"
