"""The next step of a coding agent, asked for by opening it: after results, a small model that
was asked to change something answers in text ("The value of the name field of package.json
is "tiny-widget".") where the next step is a call that writes it.

When a coding agent's turn (:attr:`~toolshim.engine.turn.Turn.one_step`) ends in a text answer
(before any call, or after results), the user's request asks for a change (write, create, fix, edit, …) and no call
since the request has made one, the model's reply is handed back to it opened as a call
(:meth:`~toolshim.dialects.base.Dialect.call_opening`: ``[`` in pythonic, ``[exec_command(``
when that is the one tool), on an upstream that
continues an assistant message (llama.cpp does). The call it writes there is returned instead
of the text when it is valid and is not one whose result the conversation already holds;
otherwise the text answer stands. One more request, bounded in tokens; asked once a turn.

Measured on the coding suite (``docs/results.md``): asked instead whether a part was left, the
1.5B wrote the same answer again in 4 of 4 such turns; asked through Codex to create a file, it
answered ``[open("greeting.txt", "w").write("hello from toolshim")]``, Python, not a call.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.asked import (
    CHANGE_ASKED,
    RUN_ASKED,
    SHELL_TOOLS,
    WRITING_TOOLS,
    action_left,
    command_ran,
    request_text,
)
from toolshim.engine.checks.made_up import grounded, made_up_calls
from toolshim.engine.checks.number_content import as_asked
from toolshim.engine.checks.ordered_steps import first_step_tool
from toolshim.engine.code_answer import writing_call, written_file_call
from toolshim.engine.file_content import CONTENT_QUESTION, content_of
from toolshim.engine.files_named import request_index, untagged
from toolshim.engine.invented import borrowed_numbers, invented_numbers
from toolshim.engine.look_written import looked_content
from toolshim.engine.more_calls import valid_call
from toolshim.engine.next_file import (
    command_opening,
    editing_opening,
    file_to_create,
    finished_call,
    reading_call,
    shell_only,
    writing_opening,
)
from toolshim.engine.nocalls import Body
from toolshim.engine.plans import (
    described_tool,
    planned_opening,
    planned_warning,
    tries_planned_step,
)
from toolshim.engine.turn import Turn, call_key
from toolshim.errors import ToolshimError
from toolshim.types import ChatRequest, Completion, Message

__all__ = [
    "CHANGE_ASKED",
    "EMPTY_WARNING",
    "RUN_ASKED",
    "action_left",
    "next_step",
    "planned_first",
    "skipped_call",
    "step_before_giving_up",
    "tries_next_step",
    "written_instead",
]

log = logging.getLogger(__name__)

COMPUTE_ASKED = re.compile(
    r"\b(count|how many|sum|total|average|mean|number of (lines|words|files|rows)|compute|"
    r"calculate)\b",
    re.IGNORECASE,
)
"""Words of a request whose answer a command computes (opened as the shell's call)."""


_MAX_TOKENS = 1024
"""A step may write a file's whole content."""


def _grounded(turn: Turn, call: ParsedCall) -> bool:
    """A planned step's values must be in the conversation now: what it waited for is."""
    return turn.request.choice.kind != "auto" or grounded(turn, call)


async def planned_first(turn: Turn, body: Body) -> tuple[ParsedCall, Completion] | None:
    """The turn's planned step (:attr:`Turn.planned`) opened as its call before the model is
    asked anything, with the completion it came in; None when there is none to open or the
    model wrote none. Offered the tools after a result with a step planned, the 0.5B answered
    in words 21 times in its 100 agent tasks, and that answer was opened as the step after
    all: a request each time."""
    if not tries_planned_step(turn):
        return None
    opening = planned_opening(turn)
    if opening is None:
        return None
    call, completion = await _opened(turn, (), body, opening[1])
    if call is None or completion is None or not _grounded(turn, call):
        turn.planned = ()  # tried: the model's own reply is asked for, and not opened again
        return None
    turn.warn(
        f"a step was left ({opening[0]!r}: held back from its plan, failed until "
        f"the results it needed were in, or named by the request); opened as that call at "
        f"once, the model wrote {call.name!r}"
    )
    return call, completion


def tries_next_step(turn: Turn) -> bool:
    """Whether a text answer of this turn is handed back opened as a call (the docstring)."""
    return turn.one_step and turn.can_open and action_left(turn)


async def next_step(
    turn: Turn,
    extra: Sequence[Message],
    body: Body,
    answer: str = "",
) -> ParsedCall | None:
    """The call the model writes when its reply is opened as one, or None (see the module
    docstring). ``extra``: the driver's messages after the history; ``body(extra)`` builds the
    upstream body. An ``answer`` that gives a whole file's new content is made the call that
    writes it instead, without asking (:mod:`~toolshim.engine.code_answer`). A step of the
    model's own plan left (:mod:`.plans`) is opened first."""
    opening = planned_opening(turn, answer)
    if opening is not None:
        call = await _opened_step(turn, extra, body, opening[1])
        if call is not None and _grounded(turn, call):
            turn.warn(planned_warning(opening[0], call.name))
            return call
    if not turn.one_step:
        return await _invented_step(turn, extra, body, answer)
    looked = looked_content(turn.request.messages)
    if looked is not None:
        return await _content_step(turn, extra, body, answer, looked)
    written = written_file_call(turn.request, answer) if answer else None
    if written is not None and (written := valid_call(turn, written)) is not None:
        turn.warn(
            f"the model answered with a file's new content where a step was left; "
            f"sent as the {written.name!r} call that writes it"
        )
        return written
    if turn.results_in:
        # A file the request names and no call has used: read it (no request), or the new
        # file it asks for: the write opened up to its content (:mod:`.next_file`).
        read = reading_call(turn.request, turn.dialect)
        parsed_read = turn.dialect.parse(read, turn.request.function_tools) if read else None
        if parsed_read and parsed_read.calls and (call := valid_call(turn, parsed_read.calls[0])):
            turn.warn(
                f"the model answered where a step was left; sent {call.name!r} of a file the "
                "request names that no call had used"
            )
            return call
    tools = turn.request.function_tools
    # One tool offered (Codex's exec_command): opened as its call, not as Python to write.
    shell = next((t.name for t in tools if t.name.lower() in SHELL_TOOLS), None)
    asked = request_text(turn)
    if (COMPUTE_ASKED.search(asked) or RUN_ASKED.search(asked)) and not command_ran(turn):
        # A count or a sum is a command's to make: asked to write it, the 1.5B wrote 16 for
        # data.txt's 17 lines and 1 for app.log's 3 errors.
        opened = command_opening(turn.request, turn.dialect) if shell else None
    elif turn.results_in:
        content = await _content_step(turn, extra, body, answer)
        if content is not None:
            return content
        opened = writing_opening(turn.request, turn.dialect) or editing_opening(
            turn.request, turn.dialect
        )
    else:
        opened = None
    prefill = opened or turn.dialect.call_opening(tools[0].name if len(tools) == 1 else None)
    if prefill is None:
        return None
    call = await _opened_step(turn, extra, body, prefill)
    if call is not None:
        turn.warn(
            f"the model answered where a step was left; opened as a call, it wrote {call.name!r}"
        )
    return call


async def _invented_step(
    turn: Turn,
    extra: Sequence[Message],
    body: Body,
    answer: str,
) -> ParsedCall | None:
    """The call an answer that invents numbers is opened as (:mod:`.invented`), when its
    values are in the conversation; None otherwise (the answer stands)."""
    invented = invented_numbers(turn, answer) if turn.can_open else ()
    borrowed = () if invented or not turn.can_open else borrowed_numbers(turn, answer)
    prefill = turn.dialect.call_opening(None) if invented or borrowed else None
    if prefill is None:
        return None
    call = await _opened_step(turn, extra, body, prefill)
    if call is None or made_up_calls(turn, [call]) != ([call], []):
        return None
    if call_key(call.name, call.arguments_json) in turn.answered_results:
        return None  # the earlier question's call again: the answer stands
    where = (
        "no message or result gives"
        if invented
        else "an earlier question's results gave, for a new subject"
    )
    turn.warn(
        f"the model answered a later question with values {where} "
        f"({', '.join(invented or borrowed)}); opened as a call, it wrote {call.name!r}"
    )
    return call


async def _content_step(
    turn: Turn,
    extra: Sequence[Message],
    body: Body,
    answer: str,
    looked: tuple[str, str] | None = None,
) -> ParsedCall | None:
    """With a shell only, the file left to write, its content asked for as plain text
    (:mod:`.file_content`), or None. ``looked``: a file a command wrote and a look showed
    (its path and what it holds, :func:`~toolshim.engine.look_written.looked_content`),
    written again when the content the model gives differs (the 1.5B's ``awk '{print $2}'``
    wrote ``=`` for the port, its ``wc -l`` ``17 data.txt`` for 17; shown them and asked
    whether they were right, it said the task was done)."""
    path: str | None = looked[0] if looked else file_to_create(turn.request)
    current = looked[1] if looked else None
    if looked is None and not shell_only(turn.request):
        return None
    if path is None or not answer.strip():
        return None
    question = CONTENT_QUESTION.format(name=path.rsplit("/", 1)[-1])
    request = _bounded(body((*extra, Message("assistant", answer), Message("user", question))))
    try:
        completion = await turn.call(request)
    except ToolshimError as exc:
        log.warning("asking for a file's content failed: %s", exc)
        return None
    reply = completion.message.text
    if turn.dialect.parse(reply, turn.request.function_tools).calls:
        return None  # a call, not the content
    content = content_of(reply, _request_and_results(turn))
    if content is not None:
        content = as_asked(turn, path, content)  # "17" for "17 data.txt", asked the number
    if content is None or (current is not None and content.strip() == current.strip()):
        return None
    written = writing_call(turn.request.function_tools, path, content + "\n")
    if (
        written is not None
        and call_key(written.name, written.arguments_json) in turn.answered_results
    ):
        return None  # written so already
    call = valid_call(turn, written) if written else None
    if call is not None:
        turn.warn(
            f"the model answered where {path!r} was left to write; asked for its content "
            f"alone, it gave it, sent as the {call.name!r} call that writes it"
        )
    return call


def _bounded(body: ChatRequest) -> ChatRequest:
    """``body`` with its output tokens held to :data:`_MAX_TOKENS`."""
    request = dict(body.params)
    limit = "max_completion_tokens" if "max_completion_tokens" in request else "max_tokens"
    caller = request.get(limit)
    request[limit] = min(int(caller), _MAX_TOKENS) if isinstance(caller, int) else _MAX_TOKENS
    return replace(body, params=request)


def _request_and_results(turn: Turn) -> str:
    """The user's last request (its own words) and the results since it."""
    messages = turn.request.messages
    index = request_index(messages)
    if index is None:
        return ""
    texts = [untagged(messages[index].text)]
    texts += [m.text for m in messages[index + 1 :] if m.role in ("tool", "function")]
    return "\n".join(texts)


async def _opened_step(
    turn: Turn,
    extra: Sequence[Message],
    body: Body,
    prefill: str,
) -> ParsedCall | None:
    """The first valid call the model writes after ``prefill``, one it has no result for."""
    return (await _opened(turn, extra, body, prefill))[0]


async def _opened(
    turn: Turn,
    extra: Sequence[Message],
    body: Body,
    prefill: str,
) -> tuple[ParsedCall | None, Completion | None]:
    """:func:`_opened_step`'s call, with the completion it came in (None: the request failed)."""
    request = _bounded(body((*extra, Message("assistant", prefill))))
    try:
        completion = await turn.call(request)
    except ToolshimError as exc:  # the text answer stands
        log.warning("asking for the next step failed: %s", exc)
        return None, None
    text = completion.message.text
    if text.startswith(prefill):  # llama.cpp returns the prefill with its continuation
        text = text[len(prefill) :]
    parsed = turn.dialect.parse(prefill + text, turn.request.function_tools, markup=turn.markup)
    closing = re.search(r"\)\]\s*\Z", text)
    if not parsed.calls and prefill.endswith('"') and closing:
        # The string the opening left open, not closed before ``)]``: the 1.5B wrote
        # ``new_string="    return \"Hello, \" + name + \"!\")]``.
        closed = f'{prefill}{text[: closing.start()]}"{text[closing.start() :]}'
        parsed = turn.dialect.parse(closed, turn.request.function_tools, markup=turn.markup)
    # The model writes its plan again from the top: its first call it has no result for (and
    # one it wrote well: the 0.5B, handed an opening, wrote create_ticket with a set for its
    # arguments, which no call can carry).
    answered = turn.answered_results
    fresh = [
        c
        for c in parsed.calls
        if c.problem is None and call_key(c.name, c.arguments_json) not in answered
    ]
    return (valid_call(turn, finished_call(fresh[0])) if fresh else None), completion


_PRINTING = re.compile(r"\A\s*(?:echo|printf)\b[^>|]*\Z")
"""A shell command that only prints its text (no redirection, no pipe)."""


def _prints_only(calls: Sequence[ParsedCall]) -> bool:
    if len(calls) != 1 or calls[0].name.lower() not in SHELL_TOOLS:
        return False
    arguments = calls[0].arguments
    if not isinstance(arguments, dict):
        return False
    command = arguments.get("cmd", arguments.get("command"))
    return isinstance(command, str) and bool(_PRINTING.match(command))


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _guessed_count(turn: Turn, calls: Sequence[ParsedCall]) -> bool:
    """A coding agent's write of a number where the request asks for a count or a sum and no
    command has run (a count is a command's to make): planned after a read of data.txt, the 1.5B wrote 15 for
    its 17 lines with ``Write(content=str(15))``."""
    if not (turn.one_step and len(calls) == 1 and tries_next_step(turn)):
        return False
    if not COMPUTE_ASKED.search(request_text(turn)) or command_ran(turn):
        return False
    call = calls[0]
    if call.name.lower() not in WRITING_TOOLS or not isinstance(call.arguments, dict):
        return False
    # Any number: a read's line numbers (``15\trecord 15``) hold every small count.
    return any(isinstance(v, str) and _NUMBER.search(v) for v in call.arguments.values())


async def written_instead(
    turn: Turn,
    calls: tuple[ParsedCall, ...],
    extra: Sequence[Message],
    body: Body,
) -> tuple[ParsedCall, ...]:
    """``calls``, or, where a coding agent's only call prints the text of a file its request
    asks to create (``echo 'hello from toolshim'`` for "create greeting.txt"), the write of
    that file opened for the model to fill (:func:`~toolshim.engine.next_file.writing_opening`).
    Through Codex the 0.5B printed the text, then printed it again after its result, and
    was re-asked twice before it wrote anything."""
    if _guessed_count(turn, calls):
        opened = command_opening(turn.request, turn.dialect)
        step = await _opened_step(turn, extra, body, opened) if opened else None
        if step is None:
            return calls
        turn.warn(
            "the model wrote a count or sum no command had computed; opened as the shell's "
            f"command, it wrote {step.name!r}"
        )
        return (step,)
    if not _prints_only(calls) or not tries_next_step(turn):
        return calls
    opened = writing_opening(turn.request, turn.dialect)
    step = await _opened_step(turn, extra, body, opened) if opened else None
    if step is None:
        return calls
    turn.warn(
        f"the model's call only printed the text of a file the request asks to create; "
        f"opened as that file's write, it wrote {step.name!r}"
    )
    return (step,)


async def step_before_giving_up(
    turn: Turn,
    extra: Sequence[Message],
    body: Body,
    answer: str,
    empty: bool = False,
) -> ParsedCall | None:
    """Where a coding agent's turn would be answered without tools (its model repeated a call
    it had the result of, after being told), the next step instead, when one is left
    (:func:`tries_next_step`): the 1.5B read calc.py, then wrote its plan again twice and,
    answered without tools, said the fix ("change it to ``return a + b``") instead of making it.
    ``empty``: the reply was empty (:func:`skipped_call`)."""
    if empty:
        skipped = await skipped_call(turn, extra, body)
        if skipped is not None:
            return skipped
        turn.warn(EMPTY_WARNING)
    if tries_next_step(turn) or tries_planned_step(turn) or described_tool(turn, answer):
        return await next_step(turn, extra, body, answer)
    return await _first_step(turn, extra, body)


EMPTY_WARNING = "the reply was empty; answered again without tools"
SKIPPED_WARNING = (
    "the reply was empty where a request waited for its first step (the model began a tool's "
    "result of its own, cut at its stop sequence); opened as a call, it wrote {name!r}"
)


async def skipped_call(turn: Turn, extra: Sequence[Message], body: Body) -> ParsedCall | None:
    """The call an empty reply skipped, opened: the model began the result of a call it never
    wrote ("Tool result for ls (call id …", 59% likely, against 18% for the call's ``[``:
    the 1.5B, asked in BFCL's multi-turn to list the files named like "goal"), the dialect's
    stop sequence cut it at once, and the reply came back empty. Only where the request waits
    for its first step (it ends with the user's message: a result after it is one the model
    already has, and an answer is what is left); handed the call's opening, it wrote
    ``[ls(a=True)]``. None (an answer without tools, as before) when the upstream does not
    continue an assistant message, or the call is not valid, already answered or made up."""
    messages = turn.request.messages
    if not turn.can_open or not messages or messages[-1].role != "user":
        return None
    opening = turn.dialect.call_opening(None)
    call = await _opened_step(turn, extra, body, opening) if opening is not None else None
    if call is None or not _grounded(turn, call):
        return None
    turn.warn(SKIPPED_WARNING.format(name=call.name))
    return call


async def _first_step(turn: Turn, extra: Sequence[Message], body: Body) -> ParsedCall | None:
    """The first of the steps the request orders, opened as its call when none is taken yet
    (:func:`~toolshim.engine.checks.ordered_steps.first_step_tool`). Told that nobody said
    Tokyo, the 1.5B asked for the weather in the capital of Japan, "Look up the capital
    first", wrote ``get_weather(city="Tokyo")``; handed ``[get_capital(country="``, "Japan"."""
    first = first_step_tool(turn.request) if turn.can_open and not turn.one_step else None
    if first is None:
        return None
    turn.planned = (first,)
    opening = planned_opening(turn)
    call = await _opened_step(turn, extra, body, opening[1]) if opening is not None else None
    if call is None or call.name != first or not _grounded(turn, call):
        return None
    turn.warn(
        f"the request orders its steps and none was taken: the first, {first!r}, opened as "
        "its call instead of an answer without tools"
    )
    return call
