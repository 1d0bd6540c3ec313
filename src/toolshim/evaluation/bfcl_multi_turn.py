"""The bridge to BFCL's multi-turn categories: cases, API simulators, decoders, checker.

Everything here is BFCL's own code from the installed ``bfcl-eval`` wheel, never rewritten:

* the cases (``load_dataset_entry``: the user turns, the initial state of the simulated APIs,
  their function docs from ``multi_turn_func_doc``, the functions held out until a later turn
  in ``multi_turn_miss_func``) and their answers (``load_ground_truth_entry``);
* the simulated APIs (file system, Twitter, messaging, tickets, trading, travel, vehicle,
  math) run by ``execute_multi_turn_func_call``, which keeps one live instance per class and
  conversation in its module's globals: :class:`Simulator` names them uniquely and removes
  them when the run is over;
* the decoders of a step's output (``convert_to_function_call`` for tool calls,
  ``default_decode_execute_prompting`` for BFCL's prompt mode), the prompt mode's way of
  returning results (``format_execution_results_prompting``), the user message that announces
  held-out functions, and the step limit (``MAXIMUM_STEP_LIMIT``);
* the checker (``multi_turn_checker``: after every user turn, the simulated state must equal
  the state the ground truth leaves, and every ground-truth result must be among the model's
  results so far), applied as BFCL's evaluation runner applies it.

The API simulators need ``mpmath`` (``toolshim[eval]`` installs it); a missing module raises
:class:`~toolshim.evaluation.bfcl.BfclMissingError` naming it.
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from toolshim.errors import ConfigError
from toolshim.evaluation.bfcl import (
    bfcl_module,
    bfcl_pieces,
    load_bfcl,
    sampled_entries,
)

__all__ = [
    "MULTI_TURN_ALIAS",
    "MULTI_TURN_CATEGORIES",
    "MultiTurnCase",
    "MultiTurnVerdict",
    "Simulator",
    "canonical_multi_turn",
    "decode_step",
    "is_multi_turn",
    "load_multi_turn",
    "load_multi_turn_cases",
    "score_multi_turn",
]

MULTI_TURN_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
"""BFCL's multi-turn categories (200 cases each)."""
MULTI_TURN_ALIAS = "multi_turn"
"""``--categories multi_turn``: all four."""

Decoder = Literal["fc", "prompt"]


@dataclass(frozen=True)
class _MultiTurnBfcl:
    """BFCL's multi-turn functions and constants, imported once."""

    execute: Any
    is_empty_execute_response: Any
    checker: Any
    convert_to_function_call: Any
    decode_execute_prompting: Any
    format_execution_results_prompting: Any
    additional_function_prompt_fc: str
    additional_function_prompt_prompting: str
    max_steps: int
    instances: dict[str, Any]
    """The globals of ``multi_turn_utils``, where the live API instances are kept."""


@cache
def load_multi_turn() -> _MultiTurnBfcl:
    """Import BFCL's multi-turn pieces (raises :class:`BfclMissingError` naming what is missing)."""
    load_bfcl()  # bfcl-eval itself, and the stand-in for its model table
    utils = bfcl_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    prompts = bfcl_module("bfcl_eval.constants.default_prompts")
    backend = bfcl_module("bfcl_eval.constants.executable_backend_config")
    for module in dict.fromkeys(backend.CLASS_FILE_PATH_MAPPING.values()):
        if module.rpartition(".")[2] in _SIMULATORS:
            bfcl_module(module)
    return _MultiTurnBfcl(
        **bfcl_pieces(_MultiTurnBfcl),
        max_steps=int(prompts.MAXIMUM_STEP_LIMIT),
        instances=vars(utils),
    )


_SIMULATORS = frozenset(
    {
        "gorilla_file_system",
        "math_api",
        "message_api",
        "posting_api",
        "ticket_api",
        "trading_bot",
        "travel_booking",
        "vehicle_control",
    }
)
"""The modules of the multi-turn categories' APIs (BFCL's web search and memory APIs, which
need more packages, belong to other categories)."""


def is_multi_turn(name: str) -> bool:
    """Whether ``name`` names BFCL's multi-turn categories (or one of them)."""
    key = name.strip().lower()
    return key == MULTI_TURN_ALIAS or key.startswith("multi_turn")


def canonical_multi_turn(names: Sequence[str]) -> list[str]:
    """BFCL's multi-turn category names for ``names`` (``multi_turn``: all four); ConfigError
    lists the available ones."""
    out: list[str] = []
    for name in names:
        key = name.strip().lower()
        if key == MULTI_TURN_ALIAS:
            out.extend(MULTI_TURN_CATEGORIES)
        elif key in MULTI_TURN_CATEGORIES:
            out.append(key)
        else:
            raise ConfigError(
                f"unknown BFCL multi-turn category {name!r}; available: "
                + ", ".join([MULTI_TURN_ALIAS, *MULTI_TURN_CATEGORIES]),
                param="categories",
            )
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class MultiTurnCase:
    """One BFCL multi-turn case: user turns over stateful simulated APIs, and the answer."""

    id: str
    category: str
    turns: tuple[tuple[Mapping[str, Any], ...], ...]
    """The user's messages, one tuple per turn (empty on a held-out function's turn)."""
    functions: tuple[Mapping[str, Any], ...]
    """The function docs offered from the first turn (BFCL's language hint included)."""
    held_out: Mapping[int, tuple[Mapping[str, Any], ...]]
    """Turn index -> the function docs added at that turn (``multi_turn_miss_func``)."""
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    ground_truth: tuple[tuple[str, ...], ...]
    """The calls of each turn, as Python call strings."""

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def entry(self) -> dict[str, Any]:
        """The fields of BFCL's test entry its checker reads (a copy)."""
        return {
            "id": self.id,
            "initial_config": copy.deepcopy(dict(self.initial_config)),
            "involved_classes": list(self.involved_classes),
        }


def load_multi_turn_cases(
    categories: Sequence[str] = MULTI_TURN_CATEGORIES,
    *,
    limit: int | None = None,
    seed: int | None = 0,
) -> list[MultiTurnCase]:
    """BFCL's multi-turn cases, ``limit`` of each category as
    :func:`~toolshim.evaluation.bfcl.sampled_entries` picks them."""
    sample = sampled_entries(canonical_multi_turn(categories), limit, seed)
    load_multi_turn()
    return [
        MultiTurnCase(
            id=str(entry["id"]),
            category=name,
            turns=tuple(tuple(turn) for turn in entry["question"]),
            functions=tuple(entry["function"]),
            held_out={
                int(turn): tuple(docs)
                for turn, docs in (entry.get("missed_function") or {}).items()
            },
            initial_config=entry.get("initial_config") or {},
            involved_classes=tuple(entry["involved_classes"]),
            ground_truth=tuple(tuple(calls) for calls in truth),
        )
        for name, entry, truth in sample
    ]


_run_numbers = itertools.count()


def _unique_name(label: str) -> str:
    """A prefix for BFCL's instance names, unique in this process."""
    safe = "".join(c if c.isalnum() else "_" for c in label)
    return f"toolshim_{os.getpid()}_{next(_run_numbers)}_{safe}"


class Simulator:
    """BFCL's live API instances for one conversation: ``execute`` runs a step's calls on them.

    BFCL keeps the instances in ``multi_turn_utils``'s globals under a name made of a model
    name and the case id; each simulator (and each scoring) uses a name of its own, so runs
    of the same case under several configurations never share state, and :meth:`close` (or
    leaving the ``with`` block) removes them.
    """

    def __init__(self, case: MultiTurnCase, label: str) -> None:
        self.case = case
        self.name = _unique_name(label)

    def execute(self, calls: list[str]) -> list[str]:
        """The result of each call (BFCL's text: a value, JSON, or ``Error during execution: …``)."""
        m = load_multi_turn()
        results, _ = m.execute(
            calls,
            copy.deepcopy(dict(self.case.initial_config)),
            list(self.case.involved_classes),
            self.name,
            self.case.id,
            long_context=self.case.long_context,
            is_evaL_run=False,
        )
        return [str(r) for r in results]

    def close(self) -> None:
        _forget(self.name)

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _forget(prefix: str) -> None:
    instances = load_multi_turn().instances
    for key in [k for k in instances if k.startswith(prefix)]:
        del instances[key]


def decode_step(output: Any, decoder: Decoder) -> list[str]:
    """A step's output as BFCL's ``decode_execute`` reads it: Python call strings. ``output``
    is what BFCL's handler stores: ``[{name: arguments_json}]`` from tool calls, or the text
    (``decoder="fc"``: text does not decode; ``"prompt"``: BFCL's prompt-mode decoder). Raises
    whatever BFCL's decoders raise on output that is not calls."""
    m = load_multi_turn()
    if decoder == "fc":
        calls: list[str] = m.convert_to_function_call(output)
        return calls
    if not isinstance(output, str):
        raise TypeError(f"a prompt-mode output is text, got {type(output).__name__}")
    decoded: list[str] = m.decode_execute_prompting(output)
    return decoded


def is_empty(calls: list[str]) -> bool:
    """BFCL's test for a step that made no call."""
    return bool(load_multi_turn().is_empty_execute_response(calls))


@dataclass(frozen=True)
class MultiTurnVerdict:
    """BFCL's verdict on a conversation."""

    valid: bool
    error: str | None = None
    error_type: str | None = None
    decoded: list[list[list[str]]] | None = None
    """The calls of each step BFCL scored, per turn (steps that made none left out)."""


def score_multi_turn(
    case: MultiTurnCase, outputs: Sequence[Sequence[Any]], *, decoder: Decoder
) -> MultiTurnVerdict:
    """Score a conversation as BFCL's evaluation runner does (``_evaluate_single_multi_turn_entry``).

    ``outputs`` holds each turn's step outputs (see :func:`decode_step`); a conversation
    stopped early (fewer turns than the case has) is ``multi_turn:force_terminated``.
    """
    m = load_multi_turn()
    if len(outputs) != len(case.ground_truth):
        return MultiTurnVerdict(
            valid=False,
            error=(
                "Model was force-terminated during inference phase. The length of the model "
                f"result turns ({len(outputs)}) does not match the length of the ground truth "
                f"turns ({len(case.ground_truth)})."
            ),
            error_type="multi_turn:force_terminated",
        )
    decoded: list[list[list[str]]] = []
    for turn in outputs:
        steps: list[list[str]] = []
        for output in turn:
            # BFCL's runner skips a step that does not decode, or decodes to no call.
            try:
                calls = decode_step(output, decoder)
            except Exception:  # BFCL catches Exception here too
                continue
            if not m.is_empty_execute_response(calls):
                steps.append(calls)
        decoded.append(steps)
    name = _unique_name("score")
    try:
        result = m.checker(
            decoded,
            [list(calls) for calls in case.ground_truth],
            case.entry(),
            case.category,
            name,
        )
    finally:
        _forget(name)
    if result.get("valid"):
        return MultiTurnVerdict(valid=True, decoded=decoded)
    return MultiTurnVerdict(
        valid=False,
        error=str(result.get("error_message") or "") or None,
        error_type=result.get("error_type"),
        decoded=decoded,
    )
