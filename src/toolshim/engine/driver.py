"""The one turn driver of emulation: after each upstream attempt, what the turn does next (sans-IO).

Both emulated paths (:mod:`.emulate`, whole replies; :mod:`.streaming`, streamed ones) and both
strategies (``single``; ``decision``, whose attempt is a JSON decision request) do the I/O and
read each reply into an :class:`Attempt`; :meth:`TurnDriver.feed` answers with the next
:class:`Step`, and the path acts on it. The driver holds the turn's policy state: re-asks used,
the messages added after the history for the next attempt, the prose already streamed.

The decisions, in order:

* the model repeated an answered call after being told so → :class:`AnswerWithoutTools`;
* the reply opened with a call the model was unsure of (:mod:`.confidence`) →
  :class:`AnswerWithoutTools`, whether its calls were valid or not;
* valid calls → :class:`ReturnCalls`;
* a valid reply without calls → :class:`ReturnText` (its prose), except: ``decision`` asks for
  the answer in a final request without tools, and so does ``single`` when the caller set a
  ``response_format`` (:data:`FORMAT_WARNING`) or the model only declined;
* an invalid reply cut by ``max_tokens`` → :class:`CutOff` (re-asking under the same limit
  would only cut again);
* an invalid reply with the re-asks spent → :class:`GiveUp` under a forced ``tool_choice``;
  under ``auto`` the reply's prose (:class:`ReturnText`, ``single`` only, never in the
  caller's ``response_format``), or, when it has none, :class:`AnswerWithoutTools`;
* else → :class:`Reask` with the correction and the reply as the model wrote it (trimmed).

A streamed attempt may have sent prose already (:attr:`Attempt.sent`); it is never taken
back, and a second answer is never sent after it (:class:`ReturnText` and :class:`CutOff` then
carry no text). Apart from that, streamed and whole replies reach the same steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.confidence import unsure_warning
from toolshim.engine.files_named import untagged
from toolshim.engine.focus import without_environment
from toolshim.engine.invented import borrowed_numbers, invented_numbers
from toolshim.engine.look_written import look_call, looked_content
from toolshim.engine.next_step import EMPTY_WARNING, tries_next_step
from toolshim.engine.plans import described_tool, tries_planned_step
from toolshim.engine.turn import Turn
from toolshim.engine.unreported import UNREPORTED_WARNING, reports_failure, unrecovered_errors
from toolshim.engine.validate import reask_message
from toolshim.errors import ToolCallError
from toolshim.types import Message, Strategy

__all__ = [
    "EMPTY_WARNING",
    "FORMAT_WARNING",
    "UNREPORTED_WARNING",
    "AnswerWithoutTools",
    "Attempt",
    "CutOff",
    "GiveUp",
    "NextStep",
    "Reask",
    "ReturnCalls",
    "ReturnText",
    "Step",
    "TurnDriver",
    "advance",
    "driver_for",
]

FORMAT_WARNING = "answered again without tools, in the caller's response_format"


@dataclass(frozen=True)
class Attempt:
    """What one upstream attempt came to, as the path that made it read it."""

    problems: tuple[str, ...] = ()
    """What was wrong with the reply's calls (empty: the reply may be returned)."""
    calls: tuple[ParsedCall, ...] = ()
    """The valid calls (when ``problems`` is empty)."""
    prose: str = ""
    """The reply's prose not sent to the caller yet."""
    sent: str = ""
    """The reply's prose already streamed to the caller (never for a whole reply)."""
    declined: bool = False
    """The model said explicitly that no tool is needed."""
    finish: str | None = None
    """The finish reason a text answer ends with."""
    truncated: bool = False
    """Cut by ``max_tokens`` (and not a loop of repeated calls trimmed to its calls)."""
    answer_now: bool = False
    """The model repeated an answered call after the re-ask that told it so."""
    reply: str = ""
    """The reply as a re-ask shows it to the model."""
    unsure: float | None = None
    """How likely the call that opens the reply was, when under the bar of
    :mod:`.confidence` (None: not judged, or sure enough)."""
    formed: bool = False
    """The reply's calls were read whole in the dialect: what is wrong is in their values
    (a check's), not in how they were written."""

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Reask:
    """Ask again, with ``messages`` after the history (every re-ask of the turn so far)."""

    messages: tuple[Message, ...]


@dataclass(frozen=True)
class ReturnCalls:
    calls: tuple[ParsedCall, ...]
    warning: str | None = None


@dataclass(frozen=True)
class ReturnText:
    """Return prose: ``text`` is what is still to send, ``finish`` the reply's own."""

    text: str
    finish: str | None
    warning: str | None = None


@dataclass(frozen=True)
class NextStep:
    """Hand the reply back opened as a call (:mod:`.next_step`); return ``text`` (still to
    send) with ``finish`` if the model writes no new valid call there."""

    text: str
    finish: str | None


@dataclass(frozen=True)
class AnswerWithoutTools:
    """Ask for the answer without tool instructions (no call may be returned as it, except
    as ``take_calls`` says). ``empty``: the reply was empty; the path first opens the call it
    may have skipped (:func:`~toolshim.engine.next_step.skipped_call`), which warns either way."""

    warning: str | None = None
    empty: bool = False
    take_calls: bool = False
    """The re-asks for unusable calls are spent: a call the model still writes, asked without
    tools, is taken when it passes the checks (:func:`~toolshim.engine.emulate.taken_calls`)."""


@dataclass(frozen=True)
class CutOff:
    """Return ``text`` with ``finish_reason: "length"``."""

    text: str
    warning: str


@dataclass(frozen=True)
class GiveUp:
    error: ToolCallError


Step = Reask | ReturnCalls | ReturnText | NextStep | AnswerWithoutTools | CutOff | GiveUp


@dataclass(kw_only=True)
class TurnDriver:
    """The emulation policy of one turn: :meth:`feed` an attempt, get the next :class:`Step`.

    ``correction`` writes the re-ask's user message from the problems; ``forced`` is a
    ``tool_choice`` that requires a call; ``formatted`` a caller's ``response_format``;
    ``decision`` the decision strategy. ``reasks`` counts up from the turn's own.
    """

    max_reasks: int
    correction: Callable[[Sequence[str]], str]
    formed_correction: Callable[[Sequence[str]], str] | None = None
    """The correction of a reply whose calls were written well (:attr:`Attempt.formed`),
    when it differs: a coding agent's, without the dialect's format reminder."""
    forced: bool = False
    formatted: bool = False
    decision: bool = False
    reasks: int = 0
    messages: tuple[Message, ...] = ()
    """What the next attempt adds after the history: each re-ask's reply and correction."""
    streamed: str = ""
    """Prose sent to the caller by the attempts before this one."""
    next_step: bool = False
    """Before a text answer is returned, open the reply as a call once (:mod:`.next_step`)."""
    confirm: str | None = None
    """Ask this once before a text answer is returned: whether a step is still to be done
    (a coding agent's turn after results; see :data:`NEXT_STEP_CHECK`)."""
    confirmed: bool = False
    answered: str = ""
    """The answer given before :attr:`confirm` was asked: returned if the model answers again
    (asked "is every part done?", the 1.5B replied "Yes, all parts are done." in place of its
    answer, 35350)."""
    look: tuple[ParsedCall, ...] = ()
    """Returned in place of :attr:`confirm`: a look at the file a command wrote
    (:mod:`.look_written`)."""
    describes: Callable[[str], bool] | None = None
    """Whether a text answer tells the user to call a tool
    (:func:`~toolshim.engine.plans.described_tool`) or gives numbers nothing in the
    conversation holds, in a later turn (:mod:`.invented`): opened as a call instead, when
    its prose was not sent yet."""
    failed: bool = False
    """A call failed and none has made its tool work since: an answer that says nothing of
    a failure is asked for again without tools (:mod:`.unreported`)."""

    @property
    def hold_text(self) -> bool:
        """Whether a streamed attempt must hold its prose until the end (it may not be the
        answer: under a forced ``tool_choice``, in the caller's ``response_format``, after
        a re-ask)."""
        return (
            self.formatted
            or self.forced
            or self.reasks > 0
            or self.confirm is not None
            or (self.next_step and not self.confirmed)
            or self.failed
        )

    def feed(self, attempt: Attempt) -> Step:
        if attempt.answer_now:
            if self.look and not self.confirmed:
                # The 0.5B wrote ``wc -l data.txt > count.txt`` again after it ran: the file
                # it wrote is looked at before the answer, as after any answer.
                self.confirmed = True
                return ReturnCalls(self.look, LOOK_WARNING)
            return AnswerWithoutTools()
        if attempt.unsure is not None and (attempt.calls or attempt.problems):
            return AnswerWithoutTools(unsure_warning(attempt.unsure))
        if attempt.ok:
            return self._valid(attempt)
        summary = "; ".join(attempt.problems)
        if attempt.truncated:
            return CutOff(
                self._unsent(attempt),
                "the reply was cut off by max_tokens before a valid tool call was complete: "
                + summary,
            )
        if self.reasks >= self.max_reasks:
            return self._give_up(attempt, summary)
        self.reasks += 1
        self.streamed += attempt.sent
        self.messages = (
            *self.messages,
            Message("assistant", attempt.reply),
            Message("user", self._corrected(attempt)),
        )
        return Reask(self.messages)

    def _corrected(self, attempt: Attempt) -> str:
        if attempt.formed and self.formed_correction is not None:
            return self.formed_correction(attempt.problems)
        return self.correction(attempt.problems)

    def _valid(self, attempt: Attempt) -> Step:
        if attempt.calls:
            return ReturnCalls(attempt.calls)
        if self.decision:  # "no tools": the final request without tools
            return AnswerWithoutTools()
        if self.formatted:
            return AnswerWithoutTools(FORMAT_WARNING)
        opens = self.next_step or (
            self.describes is not None and not attempt.sent and self.describes(attempt.prose)
        )
        if opens and not self.confirmed and attempt.prose.strip():
            self.confirmed = True
            return NextStep(attempt.prose, attempt.finish)
        if self.confirm is not None and not self.confirmed and attempt.prose.strip():
            self.confirmed = True
            self.answered = attempt.prose
            if self.look:
                return ReturnCalls(self.look, LOOK_WARNING)
            self.reasks += 1
            self.messages = (
                *self.messages,
                Message("assistant", attempt.reply),
                Message("user", self.confirm),
            )
            return Reask(self.messages)
        if not (attempt.sent + attempt.prose).strip():
            if attempt.declined:
                return AnswerWithoutTools()  # declined without answering
            if attempt.finish != "length":
                # Nothing at all (a reply that began with a made-up result ends at its stop
                # sequence): an empty answer is no answer; the call it skipped, or an answer
                # asked for without tools.
                return AnswerWithoutTools(empty=True)
        if self.answered and attempt.prose.strip():
            return ReturnText(self.answered, attempt.finish)  # the answer before the check
        if not attempt.sent and self.silent_on_failure(attempt.prose, attempt.finish):
            return AnswerWithoutTools(UNREPORTED_WARNING)
        return ReturnText(attempt.prose, attempt.finish)

    def silent_on_failure(self, answer: str, finish: str | None) -> bool:
        """Whether ``answer`` says nothing of a call that failed (:attr:`failed`): it is asked
        for again without tools (also after a :class:`NextStep` that found no call). Not an
        answer cut by ``max_tokens``: the 1.5B's "0.0000…" for a failed conversion ran to the
        limit, and asked again, ran to it again (its task hung)."""
        return self.failed and finish != "length" and not reports_failure(answer)

    def _give_up(self, attempt: Attempt, summary: str) -> Step:
        """Re-asks are spent. A forced tool_choice fails; ``auto`` degrades to a text answer:
        the prose (said already, or in this reply), or, when there is none, an answer asked
        for without tools (never the broken call's JSON as content)."""
        if self.forced:
            return GiveUp(
                ToolCallError(
                    f"the model did not make a valid tool call after {self.reasks} re-ask(s): "
                    + summary,
                    problems=attempt.problems,
                    attempts=self.reasks + 1,
                )
            )
        said = (self.streamed + attempt.sent + attempt.prose).strip()
        if said and not self.decision and not self.formatted:
            return ReturnText(
                self._unsent(attempt),
                attempt.finish,
                f"no valid tool call after {self.reasks} re-ask(s), returned the text answer: "
                + summary,
            )
        return AnswerWithoutTools(
            f"no valid tool call after {self.reasks} re-ask(s), answered without tools: {summary}",
            take_calls=True,
        )

    def _unsent(self, attempt: Attempt) -> str:
        """This reply's prose, unless an earlier one was streamed (never two answers)."""
        return "" if self.streamed else attempt.prose


def _correction(turn: Turn, problems: Sequence[str], *, reminder: bool = True) -> str:
    return reask_message(
        problems,
        turn.request.function_tools,
        turn.dialect,
        turn.prompt_options,
        reminder=reminder,
    )


NEXT_STEP_CHECK = (
    "Before you finish, check the user's request again: {question} If any part of it is not "
    "done yet (a file to write or change, a command to run), make the call for that part now: "
    "saying a value in your answer does not write it anywhere. If every part is done, give "
    "your answer again."
)
"""Asked once before a coding agent's text answer after results: the 1.5B read config.ini,
then answered "The port setting in config.ini is 1." where it was asked to write the port into
a file; small models answer where the next step is a call."""


LOOK_WARNING = (
    "the model answered after a command wrote a file the request names; sent a look at that "
    "file first, for the model to check what was written"
)


def _quoted_question(turn: Turn) -> str:
    """The user's last words before the results, quoted (the last 300 characters, without the
    blocks a client adds in tags and the environment lines)."""
    for message in reversed(turn.request.messages):
        if message.role == "user" and message.text.strip():
            # The user's own words: Claude Code's <system-reminder> about commits and the
            # environment lines filled most of the 300 characters quoted, each quote new to
            # the upstream's cache.
            said = without_environment(untagged(message.text))
            text = " ".join(said.split()) or " ".join(message.text.split())
            return f"«{text[-300:]}»"
    return "(above)."


def driver_for(turn: Turn) -> TurnDriver:
    """The driver of an emulated turn that offers tools."""
    confirm = None
    opens = tries_next_step(turn) or tries_planned_step(turn)
    look: ParsedCall | None = None
    if not opens and turn.one_step and turn.results_in and turn.request.choice.kind == "auto":
        if looked_content(turn.request.messages) is not None:
            opens = True  # the file's content is asked for again (:mod:`.next_step`)
        else:
            confirm = NEXT_STEP_CHECK.format(question=_quoted_question(turn))
            look = look_call(turn.request.messages)
    return TurnDriver(
        next_step=opens,
        confirm=confirm,
        look=(look,) if look else (),
        max_reasks=turn.max_reasks,
        correction=partial(_correction, turn),
        # A coding agent's re-ask of a well-written call (its file's content, its repeat): the
        # format reminder (~45 tokens) was most of what llama.cpp's cache could not serve of
        # such a re-ask after the model's own reply, and says nothing the reply got wrong.
        formed_correction=partial(_correction, turn, reminder=False) if turn.one_step else None,
        forced=turn.request.choice.kind != "auto",
        formatted=turn.caller_format is not None,
        decision=turn.strategy is Strategy.DECISION,
        reasks=turn.reasks,
        failed=not turn.one_step and bool(unrecovered_errors(turn.request.messages)),
        describes=lambda answer: (
            described_tool(turn, answer) is not None
            or (
                turn.can_open
                and bool(invented_numbers(turn, answer) or borrowed_numbers(turn, answer))
            )
        ),
    )


def advance(turn: Turn, driver: TurnDriver, attempt: Attempt) -> Step:
    """Feed ``attempt``; keep the turn's re-ask count and warnings in step with the driver."""
    step = driver.feed(attempt)
    turn.reasks = driver.reasks
    match step:
        case (
            ReturnText(warning=str(warning))
            | AnswerWithoutTools(warning=str(warning))
            | ReturnCalls(warning=str(warning))
        ):
            turn.warn(warning)
        case CutOff(warning=warning):
            turn.warn(warning)
    return step
