"""Check ``answered_repeats``: a call whose result the conversation holds is re-asked once.

A call whose result the conversation already holds is re-asked once, with that result
quoted ("you already have this result …: answer the user or call something else"). If the
model writes it again under ``tool_choice: "auto"``, the answer is asked for without tools,
from the results (:attr:`Turn.answer_now`); a forced ``tool_choice`` returns the call (polling
the same tool can be what is meant), with the warning the engine adds for any repeat.

A call repeated from an earlier question (the request ends with the user's new message) is
re-asked with that question quoted, once, whether its result worked or not: the model
copied the earlier turn. Beside new calls, a repeat whose result worked is dropped instead
(:func:`done_repeats`): the new calls are the step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolshim.dialects.interpret import ParsedCall
from toolshim.engine.asked import action_left
from toolshim.engine.checks.base import PASS, Check, CheckedReply, Outcome, Reask, Revise
from toolshim.engine.files_named import untouched_since_request
from toolshim.engine.history import elided, is_error_result
from toolshim.engine.next_file import reading_call
from toolshim.engine.turn import Turn, call_key

__all__ = ["CHECK", "NAME", "done_repeats", "repeat_problems"]

NAME = "answered_repeats"
_RESULT_QUOTE = 1500
"""Characters of an earlier result quoted in the re-ask (the rest is elided)."""


def repeat_problems(turn: Turn, calls: Sequence[ParsedCall]) -> list[str]:
    """The re-ask for calls whose results the conversation holds (see the module docstring)."""
    if turn.request.choice.kind != "auto" or not turn.answered_results:
        return []
    repeated = [
        (call, turn.answered_results[key])
        for call in calls
        if (key := call_key(call.name, call.arguments_json)) in turn.answered_results
    ]
    if not repeated:
        return []
    if NAME in turn.reasked:
        turn.answer_now = True
        turn.warn(
            "the model repeated a call whose result it already had, after being told so; "
            "answered from the results without tools"
        )
        return []
    worked = not any(is_error_result(result) for _, result in repeated)
    question = _new_question(turn)
    if question is not None:
        # The results are an earlier question's: asked "And in Oslo?" after Paris's weather,
        # the 0.5B wrote ``get_weather(city="Paris")`` again, and answered from the results
        # at once, it gave Oslo Paris's 18°C (every "several user turns" task it failed).
        return [
            f"you already called {call.name}({json.dumps(call.arguments, ensure_ascii=False)})"
            f" for an earlier question, and its result is above. The question now is: "
            f"{question} Make the call this question needs, with its own values; if that "
            "result already answers it, answer in plain words"
            for call, _ in repeated
        ]
    if worked and (not turn.one_step or _nothing_left(turn, [call for call, _ in repeated])):
        # Told so, the 0.5B wrote the same call again in 56 of its 100 agent tasks: the
        # re-ask cost a request and changed nothing. The answer is asked for from the results
        # at once (a step still left is opened first: :mod:`toolshim.engine.plans`). A coding
        # agent's repeat is answered so only when it is the call just made and nothing is
        # left (the 0.5B wrote Codex's here-document again after it ran, in every task): a
        # test run again after an edit can be meant, and told of its repeat with a fix still
        # to make or a named file untouched, the 0.5B went on to read calc.py and edit it.
        turn.answer_now = True
        turn.warn(
            "the model repeated a call whose result it already had; answered from the "
            "results without tools"
        )
        return []
    if not worked and not turn.one_step and turn.nothing_asked:
        # A failed call again, and the request holds nothing left to try (no value no call
        # took, no tool it names, no step planned): told it failed, the 0.5B wrote it a third
        # time in each of its tool-error tasks, and answered with the error without tools.
        turn.answer_now = True
        turn.warn(
            "the model repeated a call that failed, and the request holds nothing else to try; "
            "answered from the results without tools"
        )
        return []
    problems = []
    for call, result in repeated:
        shown = json.dumps(call.arguments, ensure_ascii=False)
        quoted = result if len(result) <= _RESULT_QUOTE else result[: _RESULT_QUOTE - 3] + "..."
        # A coding agent's results stand in the prompt just above the re-ask, in the
        # question's turn: quoted again, they were most of what llama.cpp's cache could not
        # serve of a re-ask (a traceback, a file read, 100-250 tokens).
        said = "(above)" if turn.one_step else repr(quoted)
        if is_error_result(result):
            # BFCL's multi-turn file system: the 0.5B repeated a failed cat() where a cd()
            # first would have fixed it, and was told to answer with the error.
            problems.append(
                f"you already called {call.name}({shown}) and it failed: {said}. The same "
                "call fails the same way: change its arguments, or first make the call that "
                "fixes what the error says (the folder to move to, the value to look up)"
            )
            continue
        problems.append(
            f"you already called {call.name}({shown}) and have its result: {said}. Do not "
            "call it again: answer the user's question with this result now, or call a "
            "different tool if you still need something else"
        )
    if turn.one_step:  # a coding agent: say which named files are still to look at
        untouched = untouched_since_request(turn.request.messages)
        read = reading_call(turn.request, turn.dialect)
        if untouched:
            problems.append(
                f"the request names files no call has used yet: {', '.join(untouched)}; "
                "the next step is likely with one of them"
                + (f", for example: {read}" if read else "")
            )
    return problems


_QUESTION_QUOTE = 300
"""Characters of a new question quoted in the re-ask (the rest is elided)."""


def _new_question(turn: Turn) -> str | None:
    """The user's message that ends the request when it is not a coding agent's turn (whose
    messages carry its environment): a question asked since every result the history holds.
    None when results came after the last question."""
    messages = turn.request.messages
    if turn.one_step or not messages or messages[-1].role != "user":
        return None
    text = elided(messages[-1].text, _QUESTION_QUOTE)
    return json.dumps(text, ensure_ascii=False) if text else None


def _nothing_left(turn: Turn, calls: Sequence[ParsedCall]) -> bool:
    """Whether ``calls`` are all among the calls of the last assistant message that made any,
    the request names no file left unused, and the change or run it asks for has been made."""
    if untouched_since_request(turn.request.messages) or action_left(turn):
        return False
    for message in reversed(turn.request.messages):
        if message.role == "assistant" and message.tool_calls:
            last = {call_key(c.name, c.arguments) for c in message.tool_calls}
            return all(call_key(c.name, c.arguments_json) in last for c in calls)
    return False


def done_repeats(turn: Turn, calls: Sequence[ParsedCall]) -> set[int]:
    """The positions in ``calls`` of repeats from an earlier question whose result worked,
    when a call the conversation has no result for stands beside them (else none). Asked to
    copy a file "to the 'Archives' directory inside the 'Documentation' folder", the 1.5B
    wrote ``cd(folder="Documentation")`` again beside the new ``cp``; the cd was done a
    question before (a second one fails from inside the folder), and re-asked with the new
    question, it wrote both again, and the turn was answered without tools. The result of the
    repeat is in the history, the new calls are the step."""
    answered = turn.answered_results
    if turn.request.choice.kind != "auto" or not answered or _new_question(turn) is None:
        return set()
    results = [answered.get(call_key(c.name, c.arguments_json)) for c in calls]
    done = {
        i for i, result in enumerate(results) if result is not None and not is_error_result(result)
    }
    return done if None in results else set()


def _run(reply: CheckedReply) -> Outcome:
    done = done_repeats(reply.turn, reply.calls)
    if done:
        dropped = ", ".join(reply.calls[i].name for i in sorted(done))
        kept = tuple(c for i, c in enumerate(reply.calls) if i not in done)
        note = (
            f"dropped {dropped}: repeated from an earlier question, whose result the "
            "conversation holds, beside new calls"
        )
        return Revise(kept, reply.finish, (note,))
    problems = repeat_problems(reply.turn, reply.calls)
    return Reask(tuple(problems)) if problems else PASS


CHECK = Check(NAME, _run)
