"""BFCL's scoring of one single-turn output, as its evaluation runner scores it: the output
decoded by BFCL's own decoder (function-calling or prompt), then BFCL's AST checker, or, in
the relevance categories, whether a call was decoded at all."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Literal

from toolshim.evaluation.bfcl import FC_PROFILE, PROMPT_PROFILE, BfclCase, load_bfcl

__all__ = ["Decoder", "Verdict", "decode_fc_output", "score"]


Decoder = Literal["fc", "prompt"]


@dataclass(frozen=True)
class Verdict:
    """BFCL's verdict on one output, and whether the output had the shape of tool calls.

    ``well_formed`` (None in the relevance categories): the output decoded into at least one
    call, in BFCL's ``[{name: {arg: value}}]`` shape, every call naming a function the model
    was offered. It says the reply was usable as tool calls, right or wrong.
    """

    valid: bool
    well_formed: bool | None
    called: bool
    decoded: list[Any] | None = None
    error: str | None = None
    error_type: str | None = None


def decode_fc_output(output: Any) -> list[dict[str, Any]]:
    """BFCL's OpenAI handler's ``decode_ast`` for function-calling models: ``[{name: json_args}]``
    → ``[{name: args}]``. A text reply (a ``str``) fails here, as it fails in BFCL."""
    decoded = []
    for invoked_function in output:
        name = next(iter(invoked_function))
        params = json.loads(invoked_function[name])
        decoded.append({name: params})
    return decoded


def _decode(output: Any, decoder: Decoder) -> list[Any]:
    b = load_bfcl()
    if decoder == "fc":
        return decode_fc_output(output)
    if not isinstance(output, str):
        raise TypeError(f"a prompt-mode output is text, got {type(output).__name__}")
    decoded: list[Any] = b.default_decode_ast_prompting(output, b.python_return_format, False)
    return decoded


def score(case: BfclCase, output: Any, *, decoder: Decoder) -> Verdict:
    """Score ``output`` as BFCL's evaluation runner does for single-turn categories.

    ``output`` is what BFCL's handler would store as the model's result: with ``decoder="fc"``
    a list of ``{name: arguments_json}`` (or the reply's text when it had no tool calls), with
    ``decoder="prompt"`` the reply's text.
    """
    b = load_bfcl()
    try:
        decoded = _decode(output, decoder)
    # BFCL's decoders raise whatever ast/json raise on text that is not calls; BFCL's runner
    # catches Exception here too and records the message, as we do.
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        if case.is_relevance:
            valid = case.category != "live_relevance"
            return Verdict(
                valid=valid,
                well_formed=None,
                called=False,
                error=None if valid else f"Failed to decode AST when it should have. {reason}",
                error_type=None if valid else "relevance_error:decoder_failed",
            )
        return Verdict(
            valid=False,
            well_formed=False,
            called=False,
            error=f"Invalid syntax. Failed to decode AST. {reason}",
            error_type="ast_decoder:decoder_failed",
        )
    shaped = bool(b.is_function_calling_format_output(decoded))
    called = not b.is_empty_output(decoded)
    if case.is_relevance:
        valid = not called if "irrelevance" in case.category else called
        error = None
        if not valid:
            error = (
                "Valid syntax. Successfully decode AST when it should not."
                if "irrelevance" in case.category
                else "Decoded no function call when one was expected."
            )
        return Verdict(
            valid=valid,
            well_formed=None,
            called=called,
            decoded=decoded,
            error=error,
            error_type=None
            if valid
            else (
                "irrelevance_error:decoder_success"
                if "irrelevance" in case.category
                else "relevance_error:decoder_failed"
            ),
        )
    offered = set(case.tool_names() if decoder == "fc" else case.function_names())
    well_formed = (
        shaped
        and len(decoded) > 0
        and all(isinstance(c, dict) and next(iter(c)) in offered for c in decoded)
    )
    if not shaped:
        return Verdict(
            valid=False,
            well_formed=False,
            called=called,
            decoded=decoded,
            error="Did not output in the specified format.",
            error_type="ast_decoder:decoder_wrong_output_format",
        )
    assert case.ground_truth is not None
    profile = FC_PROFILE if decoder == "fc" else PROMPT_PROFILE
    result = b.ast_checker(
        [dict(f) for f in copy.deepcopy(case.functions)],
        decoded,
        [dict(g) for g in copy.deepcopy(case.ground_truth)],
        b.python_language,
        case.category,
        profile,
    )
    errors = result.get("error") or []
    return Verdict(
        valid=bool(result["valid"]),
        well_formed=well_formed,
        called=called,
        decoded=decoded,
        error="; ".join(str(e) for e in errors) or None,
        error_type=result.get("error_type") if not result["valid"] else None,
    )
