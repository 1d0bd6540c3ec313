"""The coding-agent suite's runner: a real coding agent, headless, on each task in a fresh
folder, through toolshim or straight to the model server, judged on the folder afterwards.

One model server (the embedded llama.cpp, or one given by URL) serves every run. A
:class:`Recorder` in front of it reads what each LLM call cost (prompt tokens, those served
from its KV cache); for the ``toolshim`` configuration toolshim's proxy runs in this process
in front of that recorder, built as ``toolshim serve`` builds it, and a second recorder in front
of the proxy counts the client's turns and reads toolshim's metadata. The ``native``
configuration points the client at the model server's own ``/v1/messages`` or
``/v1/responses`` (its native tool calling; the baseline).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolshim.evaluation.coding_clients import CodingClient
from toolshim.evaluation.coding_tasks import CodingTask
from toolshim.evaluation.recorder import Exchange, Recorder
from toolshim.testing.proxy import ServedApp

__all__ = [
    "FAILURE_KINDS",
    "CodingRecord",
    "CodingRunner",
    "classify_failure",
    "summarize_coding",
]

Route = Literal["toolshim", "native"]
FAILURE_KINDS = (
    "context_overflow",
    "made_up_tool",
    "malformed_call",
    "text_instead_of_call",
    "runaway",
    "time_budget",
    "client_error",
    "wrong_result",
)
"""Why a task failed, first match wins: the model's context was too small; it called a tool
that does not exist (toolshim had to correct it); its calls could not be read or fixed; it answered in text where a call
was needed (no call at all); the client hit its turn limit; the run hit its time budget; the
client reported another error; it made calls but left the wrong result."""


@dataclass
class CodingRecord:
    """One task's run: its verdict and what it cost."""

    client: str
    route: str
    task: str
    kind: str
    passed: bool
    reason: str
    failure: str | None
    answer: str
    client_turns: int
    llm_calls: int
    prompt_tokens: int
    cached_tokens: int
    later_prompt_tokens: int
    """Prompt tokens of every LLM call but the task's first (what the cache can serve)."""
    later_cached_tokens: int
    seconds: float
    tool_calls: int
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.client, self.route, self.task)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CodingRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def classify_failure(
    *,
    passed: bool,
    errors: Sequence[str],
    warnings: Sequence[str],
    made_up_tool: bool,
    tool_calls: int,
    needs_tool: bool,
    timed_out: bool,
    client_error: str | None,
) -> str | None:
    """The failure kind of a run (None when it passed); see :data:`FAILURE_KINDS`."""
    if passed:
        return None
    text = " ".join([*errors, client_error or ""]).lower()
    if "context" in text and ("exceed" in text or "length" in text or "size" in text):
        return "context_overflow"
    if made_up_tool:
        return "made_up_tool"
    if "retries_exhausted" in text or "never produced a valid tool call" in text:
        return "malformed_call"
    if timed_out:
        return "time_budget"
    if "max_turns" in text or "max turns" in text or "maximum number of turns" in text:
        return "runaway"
    if needs_tool and tool_calls == 0:
        return "text_instead_of_call"
    if client_error:
        return "client_error"
    return "wrong_result"


@dataclass
class CodingRunner:
    """Runs tasks for one client and route against the recorders' URLs.

    ``client_url`` is the root URL the client is pointed at (the front recorder); ``front`` and
    ``back`` the recorders before toolshim (or before the model server, for ``native``) and
    before the model server."""

    client: CodingClient
    route: Route
    client_url: str
    model: str
    front: Recorder
    back: Recorder
    budget: float = 600.0
    max_turns: int = 12
    keep: Path | None = None
    """Keep each task's folder and the client's output under this folder."""

    def run(self, task: CodingTask) -> CodingRecord:
        with _folder(self.keep, f"{self.client.name}-{self.route}-{task.id}") as root:
            work = root / "work"
            home = root / "home"
            work.mkdir()
            home.mkdir()
            task.prepare(work)
            argv, env = self.client.command(
                task.prompt,
                base_url=self.client_url,
                model=self.model,
                home=home,
                max_turns=self.max_turns,
            )
            front, back = self.front.mark(), self.back.mark()
            started = time.monotonic()
            stdout, code, timed_out = _run(argv, env, work, self.budget, root / "client.log")
            seconds = time.monotonic() - started
            outcome = self.client.read_output(stdout, code, timed_out)
            verdict = task.judge(work, outcome.answer)
            return self._record(
                task,
                verdict.passed,
                verdict.reason,
                outcome.answer,
                outcome.error,
                timed_out,
                seconds,
                self.front.since(front),
                self.back.since(back),
            )

    def _record(
        self,
        task: CodingTask,
        passed: bool,
        reason: str,
        answer: str,
        client_error: str | None,
        timed_out: bool,
        seconds: float,
        front: list[Exchange],
        back: list[Exchange],
    ) -> CodingRecord:
        turns = [e for e in front if e.method == "POST" and _is_turn(e.path)]
        calls = [e for e in back if e.method == "POST" and _is_turn(e.path)]
        warnings = [str(w) for e in turns for w in e.toolshim.get("warnings", ()) or ()]
        errors = [e.error for e in [*turns, *calls] if e.error]
        tool_calls = max(0, len(turns) - 1)  # a client sends its next turn with results
        prompt = [e.prompt_tokens or 0 for e in calls]
        cached = [e.cached_tokens or 0 for e in calls]
        failure = classify_failure(
            passed=passed,
            errors=errors,
            warnings=warnings,
            made_up_tool=any(e.made_up_tool for e in calls),
            tool_calls=tool_calls,
            needs_tool=task.kind != "no_tool",
            timed_out=timed_out,
            client_error=client_error,
        )
        if timed_out and not passed:
            reason = f"time budget ({self.budget:.0f} s) spent; {reason}"
        return CodingRecord(
            client=self.client.name,
            route=self.route,
            task=task.id,
            kind=task.kind,
            passed=passed,
            reason=reason,
            failure=failure,
            answer=answer[:2000],
            client_turns=len(turns),
            llm_calls=len(calls),
            prompt_tokens=sum(prompt),
            cached_tokens=sum(cached),
            later_prompt_tokens=sum(prompt[1:]),
            later_cached_tokens=sum(cached[1:]),
            seconds=round(seconds, 1),
            tool_calls=tool_calls,
            warnings=warnings[:20],
            errors=errors[:10],
        )


def _is_turn(path: str) -> bool:
    return path.rstrip("/").endswith(("/messages", "/responses", "/chat/completions"))


def _run(
    argv: list[str], env: dict[str, str], cwd: Path, budget: float, log: Path
) -> tuple[str, int, bool]:
    """Run the client; kill its whole process group at the budget. (stdout, exit, timed out)"""
    with log.open("wb") as err:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        try:
            out, _ = process.communicate(timeout=budget)
            return out.decode("utf-8", "replace"), process.returncode, False
        except subprocess.TimeoutExpired:
            _kill_group(process)
            out, _ = process.communicate()
            return out.decode("utf-8", "replace"), process.returncode or -9, True


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    import os
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def _folder(keep: Path | None, name: str) -> Iterator[Path]:
    if keep is not None:
        root = keep / name
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix=f"toolshim-coding-{name}-") as tmp:
        yield Path(tmp)


# -- summaries -------------------------------------------------------------------------------


def summarize_coding(records: Sequence[CodingRecord]) -> list[dict[str, Any]]:
    """One row per (client, route): passed, medians, cache reuse and failure kinds."""
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[CodingRecord]] = {}
    for record in records:
        groups.setdefault((record.client, record.route), []).append(record)
    for (client, route), group in sorted(groups.items()):
        later = sum(r.later_prompt_tokens for r in group)
        reused = sum(r.later_cached_tokens for r in group)
        failures: dict[str, int] = {}
        for record in group:
            if record.failure:
                failures[record.failure] = failures.get(record.failure, 0) + 1
        rows.append(
            {
                "client": client,
                "route": route,
                "tasks": len(group),
                "passed": sum(r.passed for r in group),
                "median_seconds": round(statistics.median(r.seconds for r in group), 1),
                "llm_calls": sum(r.llm_calls for r in group),
                "client_turns": sum(r.client_turns for r in group),
                "prompt_tokens": sum(r.prompt_tokens for r in group),
                "cached_tokens": sum(r.cached_tokens for r in group),
                "later_cache_reuse": round(reused / later, 3) if later else None,
                "failures": failures,
            }
        )
    return rows


# -- threads ----------------------------------------------------------------------------------


class ServedThread(ServedApp):
    """An ASGI app served by uvicorn from a background thread on 127.0.0.1 (a free port)."""

    def __init__(self, app: Any) -> None:
        super().__init__(app, quiet=False, log_level="warning", timeout_keep_alive=30)
