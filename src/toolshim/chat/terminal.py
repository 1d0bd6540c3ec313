"""The chat's terminal: reading lines (prompt_toolkit), asking questions with a time limit, and
watching the keyboard while a reply streams (Ctrl-C cancels it; typed lines are queued).

:class:`PromptTerminal` is the interactive one; :class:`LineTerminal` reads plain lines when
stdin is not a terminal (``echo "2+2?" | toolshim chat``) and never asks questions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import platformdirs
from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from rich.console import Console

__all__ = [
    "LineTerminal",
    "PromptTerminal",
    "Terminal",
    "history_path",
    "make_terminal",
]

log = logging.getLogger("toolshim.chat")

LineHandler = Callable[[str], None]


class Terminal(Protocol):
    """What the chat session needs from a terminal."""

    console: Console
    interactive: bool

    async def read_line(self, prompt: str) -> str | None:
        """The next line the user enters; "" after Ctrl-C at the prompt, None at the end (Ctrl-D)."""
        ...

    async def ask(self, question: str, answers: Mapping[str, str], time_limit: float) -> str | None:
        """Ask ``question``; return the canonical answer (a value of ``answers``, whose keys are
        what the user may type), or None when there was no answer within ``time_limit`` seconds."""
        ...

    async def watch(self, task: asyncio.Task[Any], on_line: LineHandler) -> bool:
        """Wait for ``task``; Ctrl-C cancels it (True is returned then). Lines typed meanwhile
        go to ``on_line``."""
        ...


def history_path() -> Path:
    """Where the chat keeps its input history: ``TOOLSHIM_CHAT_HISTORY`` or the user data dir."""
    configured = os.environ.get("TOOLSHIM_CHAT_HISTORY")
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_data_dir("toolshim")) / "chat_history"


def _history(path: Path, console: Console) -> History:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError as exc:
        console.print(
            f"[yellow]warning:[/] cannot keep the input history in {path} ({exc.strerror}); "
            "it lasts for this session only"
        )
        return InMemoryHistory()
    return FileHistory(str(path))


def _key_bindings() -> KeyBindings:
    """Esc-Enter, or Enter after a trailing backslash, starts a new line instead of sending."""
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if (
            buffer.document.text_before_cursor.endswith("\\")
            and buffer.document.is_cursor_at_the_end
        ):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return bindings


class PromptTerminal:
    """An interactive terminal on prompt_toolkit; output goes through ``console`` (rich)."""

    interactive = True

    def __init__(self, console: Console, history: Path | None = None) -> None:
        self.console = console
        self.input: Input = create_input(sys.stdin)
        self.session: PromptSession[str] = PromptSession(
            history=_history(history or history_path(), console),
            input=self.input,
            key_bindings=_key_bindings(),
            multiline=False,
            prompt_continuation="… ",
            enable_history_search=False,
        )
        self.questions: PromptSession[str] = PromptSession(input=self.input)
        self.typed = ""
        """What was typed during a reply without Enter: it becomes the next prompt's text."""

    async def read_line(self, prompt: str) -> str | None:
        default, self.typed = self.typed, ""
        try:
            return await self.session.prompt_async(prompt, default=default, handle_sigint=False)
        except KeyboardInterrupt:
            return ""
        except EOFError:
            return None

    async def ask(self, question: str, answers: Mapping[str, str], time_limit: float) -> str | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + time_limit
        choices = ", ".join(dict.fromkeys(a for a in answers if len(a) == 1))
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                async with asyncio.timeout(remaining):
                    text = await self.questions.prompt_async(f"{question} ", handle_sigint=False)
            except TimeoutError:
                return None
            except (KeyboardInterrupt, EOFError):
                return None
            answer = answers.get(text.strip().lower())
            if answer is not None:
                return answer
            self.console.print(f"[yellow]Please answer {choices}.[/]")

    async def watch(self, task: asyncio.Task[Any], on_line: LineHandler) -> bool:
        cancelled = False

        def keys_ready() -> None:
            nonlocal cancelled
            for press in self.input.read_keys():
                key = press.key
                if key == Keys.ControlC:
                    if not task.done():
                        cancelled = True
                        task.cancel()
                elif key in (Keys.ControlM, Keys.ControlJ):
                    line, self.typed = self.typed, ""
                    on_line(line)
                elif key == Keys.ControlD and not self.typed:
                    on_line("/quit")
                elif key == Keys.Backspace:
                    self.typed = self.typed[:-1]
                elif key == Keys.BracketedPaste or (len(key) == 1 and key.isprintable()):
                    self.typed += press.data

        with self._watching(keys_ready):
            await asyncio.wait({task})
        return cancelled and task.cancelled()

    def _watching(self, callback: Callable[[], None]) -> AbstractContextManager[None]:
        if not sys.stdin.isatty():
            return nullcontext()
        return _Both(self.input.raw_mode(), self.input.attach(callback))


class _Both:
    """Enter two context managers, leave them in reverse order."""

    def __init__(self, first: AbstractContextManager[Any], second: AbstractContextManager[Any]):
        self.first, self.second = first, second

    def __enter__(self) -> None:
        self.first.__enter__()
        try:
            self.second.__enter__()
        except BaseException:
            self.first.__exit__(*sys.exc_info())
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            self.second.__exit__(*exc)
        finally:
            self.first.__exit__(*exc)


class LineTerminal:
    """Plain lines from a pipe or file: no prompt, no questions (the safe default is used)."""

    interactive = False

    def __init__(self, console: Console) -> None:
        self.console = console

    async def read_line(self, prompt: str) -> str | None:
        line = str(await asyncio.to_thread(sys.stdin.readline))
        if not line:
            return None
        self.console.print(f"{prompt}{line.rstrip()}", markup=False, highlight=False)
        return line.rstrip("\n")

    async def ask(self, question: str, answers: Mapping[str, str], time_limit: float) -> str | None:
        self.console.print(f"{question} (stdin is not a terminal: no answer)", markup=False)
        return None

    async def watch(self, task: asyncio.Task[Any], on_line: LineHandler) -> bool:
        await asyncio.wait({task})
        return task.cancelled()


def make_terminal(console: Console) -> PromptTerminal | LineTerminal:
    """An interactive terminal when stdin and stdout are terminals, else a line reader."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return PromptTerminal(console)
    return LineTerminal(console)
