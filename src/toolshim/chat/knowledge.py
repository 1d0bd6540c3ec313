"""What the chat knows about each model's tools, and seed 004's questions that settle it.

* **Unknown model** — no source says anything: ask ``[y]es / [n]o / [a]uto-detect``; y/n are
  stored with source ``user``, auto-detect runs the probe (source ``probe``); no answer in
  time (or an inconclusive probe) leaves the model unknown and emulates its tools for the
  session, storing nothing; ``/model use`` asks again.
* **Runtime learning** — when the engine learned during a reply that the upstream rejects
  tools (it retried with emulation, so the reply still came), ask whether to remember it:
  yes → source ``user``; no (or no answer) → this session only, and the learned
  ``runtime_error`` fact is taken back. Never asked when a ``user`` fact exists.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from toolshim.capabilities.facts import Fact, Source, Support
from toolshim.capabilities.probe import probe_tools, record_probe
from toolshim.capabilities.registry import Registry, model_key
from toolshim.chat.render import Renderer
from toolshim.chat.status import ToolStatus, tool_status
from toolshim.chat.terminal import Terminal
from toolshim.types import Mode
from toolshim.upstreams.base import Upstream

__all__ = ["YES_NO", "YES_NO_AUTO", "ModelKnowledge"]

YES_NO_AUTO = {
    "y": "yes",
    "yes": "yes",
    "n": "no",
    "no": "no",
    "a": "auto",
    "auto": "auto",
    "auto-detect": "auto",
    "autodetect": "auto",
}
YES_NO = {"y": "yes", "yes": "yes", "n": "no", "no": "no"}

Foreground = Callable[["asyncio.Task[Any]"], Awaitable[bool]]
"""Runs a task while watching the keyboard; True when the user cancelled it."""


class ModelKnowledge:
    """The registry's facts about the models at one upstream, plus this session's decisions."""

    def __init__(
        self,
        registry: Registry,
        upstream: Upstream,
        terminal: Terminal,
        render: Renderer,
        *,
        has_tools: bool,
        foreground: Foreground,
    ) -> None:
        self.registry = registry
        self.upstream = upstream
        self.key = upstream.key
        self.terminal = terminal
        self.render = render
        self.has_tools = has_tools
        self.foreground = foreground
        self.session_notes: dict[str, str] = {}
        """Model key → why tools are emulated for this session only (nothing was stored)."""
        self.unsettled: set[str] = set()
        """Model keys whose question went unanswered: the next ``/model use`` asks again."""

    def status(self, model: str, mode: Mode, dialect: str | None) -> ToolStatus:
        return tool_status(
            self.registry,
            self.key,
            model,
            mode=mode,
            dialect=dialect,
            has_tools=self.has_tools,
            session_note=self.session_notes.get(model_key(model)),
        )

    def emulated_for_session(self, model: str) -> bool:
        return model_key(model) in self.session_notes

    def unknown(self, model: str, mode: Mode) -> bool:
        """True when no source says anything about ``model``'s native tools and it matters."""
        if not self.has_tools or mode in (Mode.FORCE, Mode.OFF):
            return False
        if self.emulated_for_session(model):
            return False
        return self.registry.fact(self.key, model, "native_tools") is None

    def reopen(self, model: str) -> None:
        """Forget an unanswered question's session decision, so that it is asked again."""
        key = model_key(model)
        if key in self.unsettled:
            self.unsettled.discard(key)
            self.session_notes.pop(key, None)

    def _emulate_for_session(self, model: str, why: str, *, settled: bool = False) -> None:
        self.session_notes[model_key(model)] = why
        if not settled:
            self.unsettled.add(model_key(model))

    # -- the unknown model ------------------------------------------------------------------

    async def settle_unknown(self, model: str, time_limit: float, probe_limit: float) -> None:
        """Seed 004's unknown-model question, with auto-detect and a safe default."""
        self.render.notice(
            f"{model} is new to toolshim: no profile, no stored fact and the upstream did not "
            "say whether it supports native tool calling."
        )
        answer = await self.terminal.ask(
            f"Does {model} support native tool calling? [y]es / [n]o / [a]uto-detect "
            f"(no answer in {time_limit:g} s: emulate) ›",
            YES_NO_AUTO,
            time_limit,
        )
        if answer in ("yes", "no"):
            support = Support.YES if answer == "yes" else Support.NO
            self.registry.learn(
                self.key,
                model,
                "native_tools",
                support,
                Source.USER,
                detail="answered in toolshim chat",
            )
            what = "supports native tools" if answer == "yes" else "has no native tools"
            self.render.notice(f"Saved: {model} {what} (source user).", "green")
        elif answer == "auto":
            await self.auto_detect(model, probe_limit)
        else:
            self._emulate_for_session(
                model, "tool support unknown (no answer), so tools are emulated for this session"
            )
            self.render.notice(
                f"No answer within {time_limit:g} s: {model}'s tool support stays unknown, so "
                "toolshim emulates tools for this session to be safe (nothing saved; "
                f"/model use {model} asks again)."
            )

    async def auto_detect(self, model: str, time_limit: float) -> None:
        """Run the registry's probe with a spinner; store a conclusive result (source probe)."""
        task = asyncio.create_task(probe_tools(self.upstream, model, time_limit=time_limit))
        with self.terminal.console.status(
            f"Auto-detecting tool support for {model} (one test request, up to "
            f"{time_limit:g} s; Ctrl-C skips)…"
        ):
            cancelled = await self.foreground(task)
        if cancelled:
            self._emulate_for_session(
                model, "auto-detect was skipped, so tools are emulated for this session"
            )
            self.render.notice("Auto-detect skipped: tools are emulated for this session.")
            return
        result = task.result()
        fact = record_probe(self.registry, self.key, result)
        if fact is None:
            self._emulate_for_session(
                model, "auto-detect was inconclusive, so tools are emulated for this session"
            )
            self.render.notice(
                f"Auto-detect was inconclusive ({result.detail}); nothing saved. toolshim "
                "emulates tools for this session to be safe."
            )
            return
        self.render.notice(
            f"Auto-detect: {result.outcome.value} — {result.detail} ({result.seconds:.1f} s). "
            f"Saved (source {fact.source.value}).",
            "green",
        )

    # -- runtime learning -------------------------------------------------------------------

    def runtime_fact(self, model: str) -> Fact | None:
        """The ``runtime_error`` fact stored for ``model`` at this upstream, if any."""
        for item in self.registry.evidence(self.key, model).get("native_tools", ()):
            if item.fact.source is Source.RUNTIME_ERROR and item.scope == "this upstream":
                return item.fact
        return None

    async def after_reply(
        self,
        model: str,
        *,
        since: float,
        had_runtime_fact: bool,
        time_limit: float,
        mode: Mode,
        dialect: str | None,
    ) -> None:
        """Seed 004's runtime learning, when the upstream rejected tools during the last reply."""
        learned = self.runtime_fact(model)
        if learned is None or learned.updated_at < since:
            return
        evidence = self.registry.evidence(self.key, model).get("native_tools", ())
        user = next((e.fact for e in evidence if e.fact.source is Source.USER), None)
        if user is not None:
            if user.support is Support.YES:
                self.render.notice(
                    f"The upstream rejected native tools for {model} although you set it to "
                    "native; this reply used emulated tools. `toolshim models set "
                    f"{model} --tools no` stops trying."
                )
            return
        reason = learned.detail.split(": ", 1)[-1] if learned.detail else "rejected"
        self.render.notice(
            f"The upstream rejected native tools for {model} ({reason}); toolshim answered "
            "with emulated tools instead."
        )
        answer = await self.terminal.ask(
            "This model appears not to support native tools. Remember this? [y/n] ›",
            YES_NO,
            time_limit,
        )
        if answer == "yes":
            self.registry.learn(
                self.key,
                model,
                "native_tools",
                Support.NO,
                Source.USER,
                detail=f"confirmed in toolshim chat after: {learned.detail}"[:500],
            )
            headline = self.status(model, mode, dialect).headline
            self.render.notice(
                f"Saved: {model} has no native tools (source user). {headline} from now on.",
                "green",
            )
            return
        if not had_runtime_fact:
            self.registry.forget(
                self.key, model, names=["native_tools"], sources=[Source.RUNTIME_ERROR]
            )
        self._emulate_for_session(
            model,
            "the upstream rejected tools; emulated for this session only (not saved)",
            settled=True,
        )
        lead = "Not saved" if answer == "no" else "No answer, so not saved"
        self.render.notice(f"{lead}: tools are emulated for {model} in this session only.")
