"""The bridge to the Berkeley Function Calling Leaderboard (``bfcl-eval``): cases, tools, prompts, checker.

Everything toolshim's evaluation takes from BFCL goes through this module, and all of it is
BFCL's own code, imported from the installed wheel, never rewritten:

* the cases and their possible answers (``bfcl_eval.utils.load_dataset_entry`` /
  ``load_ground_truth_entry``), with BFCL's own language hint added to the function docs;
* the function docs as OpenAI tools (``convert_to_tool`` with ``GORILLA_TO_OPENAPI``, as its
  OpenAI chat-completions handler does: dots in names become underscores, ``dict``/``float``/
  ``tuple``/``any`` become JSON Schema types);
* the prompt-mode system prompt (``system_prompt_pre_processing_chat_model``) and its
  decoder (``default_decode_ast_prompting``);
* the AST checker (``ast_checker``) and its format helpers (``is_function_calling_format_output``,
  ``is_empty_output``).

``bfcl-eval`` is installed with ``--no-deps`` (its dependencies pull torch). Its checker
module imports ``bfcl_eval.constants.model_config`` only to read one flag of the model being
scored, ``underscore_to_dot``, and that module imports every vendor SDK BFCL supports. When
those SDKs are missing, :func:`load_bfcl` puts a stand-in with the same two entries toolshim scores
under (values copied from BFCL's table, checked against it in the tests) in its place.
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
import random
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolshim.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "BFCL_VERSION",
    "CATEGORY_ALIASES",
    "DEFAULT_CATEGORIES",
    "FC_PROFILE",
    "INSTALL_COMMAND",
    "PROMPT_PROFILE",
    "RELEVANCE_CATEGORIES",
    "SUPPORTED_CATEGORIES",
    "BfclCase",
    "BfclMissingError",
    "bfcl_available",
    "canonical_category",
    "load_bfcl",
    "load_cases",
]

BFCL_VERSION = "2026.3.23"
"""The bfcl-eval release this module was written and tested against."""

INSTALL_COMMAND = f"pip install 'toolshim[eval]' && pip install --no-deps bfcl-eval=={BFCL_VERSION}"
"""What to run when bfcl-eval is missing (``toolshim[eval]`` brings the modules its checker,
parsers and loaders import: tree-sitter with its Java/JavaScript grammars, filelock, tenacity)."""

DEFAULT_CATEGORIES: tuple[str, ...] = (
    "simple",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_irrelevance",
)
"""The default sample's categories. Each category's sample is seeded by ``(seed, category)``
alone (:func:`load_cases`), so adding a category leaves the cases of the others as they were:
reports made on the first six still line up case for case. With ``--limit 50`` (the published
runs) the sample is 50 cases a category, except ``live_parallel``, which has 16 in all:
416 cases (300 of them the first six categories' sample)."""
CATEGORY_ALIASES: Mapping[str, str] = {"simple": "simple_python"}
"""Short names: BFCL v4 split ``simple`` into ``simple_python``/``_java``/``_javascript``."""

RELEVANCE_CATEGORIES: frozenset[str] = frozenset(
    {"irrelevance", "live_irrelevance", "live_relevance"}
)
"""Categories scored only on whether a call was made (no possible answer to compare with)."""

SUPPORTED_CATEGORIES: tuple[str, ...] = (
    *(CATEGORY_ALIASES.get(c, c) for c in DEFAULT_CATEGORIES if c != "live_irrelevance"),
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
"""BFCL's single-turn Python categories: the ones its AST checker scores from one reply (the
default sample's, and three more)."""

FC_PROFILE = "gpt-4o-2024-11-20-FC"
"""The BFCL model key the checker scores tool calls under: a function-calling model whose
``underscore_to_dot`` is true, because its tools had dots in names turned into underscores."""

PROMPT_PROFILE = "gpt-4o-2024-11-20"
"""The BFCL model key the prompt-mode baseline is scored under (names keep their dots)."""

_STANDIN_UNDERSCORE_TO_DOT: Mapping[str, bool] = {FC_PROFILE: True, PROMPT_PROFILE: False}


class BfclMissingError(ConfigError):
    """bfcl-eval (or a module its checker imports) is not installed."""

    def __init__(self, missing: str) -> None:
        if missing.partition(".")[0] == "bfcl_eval":
            missing = "bfcl-eval"
        super().__init__(
            f"the BFCL evaluation needs {missing!r}, which is not installed; run: "
            f"{INSTALL_COMMAND}",
            param="bfcl-eval",
        )
        self.missing = missing


_MULTI_TURN_UTILS = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
_DEFAULT_PROMPTS = "bfcl_eval.constants.default_prompts"


@dataclass(frozen=True)
class _Bfcl:
    """BFCL's functions and constants, imported once."""

    load_dataset_entry: Any
    load_ground_truth_entry: Any
    add_language_hint: Any
    convert_to_tool: Any
    gorilla_to_openapi: Any
    openai_completions_style: Any
    system_prompt_pre_processing_chat_model: Any
    default_decode_ast_prompting: Any
    ast_checker: Any
    is_function_calling_format_output: Any
    is_empty_output: Any
    python_language: Any
    python_return_format: Any
    standin_model_config: bool
    version: str


def _bfcl_project_root() -> Path:
    """Where BFCL may create its ``result/``, ``score/`` and lock folders (not site-packages)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("toolshim")) / "bfcl"


def _standin_model_config() -> types.ModuleType:
    module = types.ModuleType(
        "bfcl_eval.constants.model_config",
        "toolshim's stand-in for BFCL's model table: only the entries toolshim scores under.",
    )
    module.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
        name: types.SimpleNamespace(model_name=name, underscore_to_dot=flag)
        for name, flag in _STANDIN_UNDERSCORE_TO_DOT.items()
    }
    return module


_PLACES = {
    # The single-turn (AST) suite's, the fields of _Bfcl (its checker comes after the stand-in).
    "load_dataset_entry": "bfcl_eval.utils:load_dataset_entry",
    "load_ground_truth_entry": "bfcl_eval.utils:load_ground_truth_entry",
    "add_language_hint": "bfcl_eval.utils:add_language_specific_hint_to_function_doc",
    "convert_to_tool": "bfcl_eval.model_handler.utils:convert_to_tool",
    "gorilla_to_openapi": "bfcl_eval.constants.type_mappings:GORILLA_TO_OPENAPI",
    "openai_completions_style": "bfcl_eval.constants.enums:ModelStyle.OPENAI_COMPLETIONS",
    "system_prompt_pre_processing_chat_model": (
        "bfcl_eval.model_handler.utils:system_prompt_pre_processing_chat_model"
    ),
    "default_decode_ast_prompting": "bfcl_eval.model_handler.utils:default_decode_ast_prompting",
    "is_function_calling_format_output": "bfcl_eval.utils:is_function_calling_format_output",
    "is_empty_output": "bfcl_eval.utils:is_empty_output",
    "python_language": "bfcl_eval.constants.enums:Language.PYTHON",
    "python_return_format": "bfcl_eval.constants.enums:ReturnFormat.PYTHON",
    # The multi-turn suite's, the fields of bfcl_multi_turn._MultiTurnBfcl.
    "execute": f"{_MULTI_TURN_UTILS}:execute_multi_turn_func_call",
    "is_empty_execute_response": f"{_MULTI_TURN_UTILS}:is_empty_execute_response",
    "checker": "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker:multi_turn_checker",
    "convert_to_function_call": "bfcl_eval.model_handler.utils:convert_to_function_call",
    "decode_execute_prompting": "bfcl_eval.model_handler.utils:default_decode_execute_prompting",
    "format_execution_results_prompting": (
        "bfcl_eval.model_handler.utils:format_execution_results_prompting"
    ),
    "additional_function_prompt_fc": (
        f"{_DEFAULT_PROMPTS}:DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC"
    ),
    "additional_function_prompt_prompting": (
        f"{_DEFAULT_PROMPTS}:DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING"
    ),
}
"""Where BFCL keeps each piece toolshim uses (``module:attribute``), by the field it fills."""


def bfcl_module(name: str) -> Any:
    """BFCL's module ``name`` imported (:class:`BfclMissingError` naming what is missing)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise BfclMissingError(exc.name or "bfcl-eval") from exc


def bfcl_pieces(holder: type[DataclassInstance]) -> dict[str, Any]:
    """For each field of the dataclass ``holder`` that :data:`_PLACES` places, BFCL's piece
    there, imported in the order of the fields."""
    found: dict[str, Any] = {}
    for each in fields(holder):
        if each.name in _PLACES:
            module, _, path = _PLACES[each.name].partition(":")
            found[each.name] = functools.reduce(getattr, path.split("."), bfcl_module(module))
    return found


@cache
def load_bfcl() -> _Bfcl:
    """Import BFCL's pieces (raises :class:`BfclMissingError` naming what is missing)."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(_bfcl_project_root()))
    try:
        from importlib.metadata import version

        installed = version("bfcl-eval")
        pieces = bfcl_pieces(_Bfcl)
    except ImportError as exc:  # importlib.metadata.PackageNotFoundError
        raise BfclMissingError("bfcl-eval") from exc
    standin = False
    try:
        importlib.import_module("bfcl_eval.constants.model_config")
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] == "bfcl_eval":
            raise BfclMissingError(exc.name or "bfcl-eval") from exc
        # A vendor SDK of one of BFCL's model handlers (anthropic, cohere, …) is missing.
        sys.modules["bfcl_eval.constants.model_config"] = _standin_model_config()
        standin = True
    checker = bfcl_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    return _Bfcl(
        **pieces, ast_checker=checker.ast_checker, standin_model_config=standin, version=installed
    )


def bfcl_available() -> str | None:
    """None when BFCL can be used, else the reason it cannot (with the install command)."""
    try:
        load_bfcl()
    except BfclMissingError as exc:
        return exc.message
    return None


def canonical_category(name: str) -> str:
    """BFCL's name for a category (``simple`` → ``simple_python``); ConfigError if unsupported."""
    key = name.strip().lower()
    key = CATEGORY_ALIASES.get(key, key)
    if key not in SUPPORTED_CATEGORIES:
        known = ", ".join([*CATEGORY_ALIASES, *SUPPORTED_CATEGORIES])
        raise ConfigError(f"unknown BFCL category {name!r}; available: {known}", param="categories")
    return key


@dataclass(frozen=True)
class BfclCase:
    """One BFCL test case: the user turn, the function docs, and the possible answers."""

    id: str
    category: str
    messages: tuple[Mapping[str, Any], ...]
    functions: tuple[Mapping[str, Any], ...]
    """The function docs as BFCL scores against them (no language hint)."""
    ground_truth: tuple[Mapping[str, Any], ...] | None = None
    """BFCL's possible answers; None for the relevance categories."""
    hinted_functions: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    """The function docs as BFCL sends them to a model (with its Python-syntax hint)."""

    @property
    def is_relevance(self) -> bool:
        return self.category in RELEVANCE_CATEGORIES

    def tools(self) -> list[dict[str, Any]]:
        """The functions as OpenAI ``tools``, converted by BFCL's OpenAI handler's own code."""
        b = load_bfcl()
        functions = copy.deepcopy([dict(f) for f in self.hinted_functions or self.functions])
        tools: list[dict[str, Any]] = b.convert_to_tool(
            functions, b.gorilla_to_openapi, b.openai_completions_style
        )
        return tools

    def tool_names(self) -> list[str]:
        return [str(tool["function"]["name"]) for tool in self.tools()]

    def function_names(self) -> list[str]:
        return [str(f["name"]) for f in self.functions]

    def chat_messages(self) -> list[dict[str, Any]]:
        """The user turn as OpenAI messages (a copy)."""
        return copy.deepcopy([dict(m) for m in self.messages])

    def prompt_messages(self) -> list[dict[str, Any]]:
        """The user turn with BFCL's prompt-mode system prompt, as its prompting handlers send it."""
        b = load_bfcl()
        functions = copy.deepcopy([dict(f) for f in self.hinted_functions or self.functions])
        messages: list[dict[str, Any]] = b.system_prompt_pre_processing_chat_model(
            self.chat_messages(), functions, self.id
        )
        return messages


def _select(category: str, count: int, limit: int | None, seed: int | None) -> list[int]:
    if limit is None or limit >= count:
        return list(range(count))
    if seed is None:
        return list(range(limit))
    return sorted(random.Random(f"{seed}/{category}").sample(range(count), limit))


def load_cases(
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    *,
    limit: int | None = None,
    seed: int | None = 0,
) -> list[BfclCase]:
    """BFCL's cases for ``categories``, ``limit`` of each as :func:`sampled_entries` picks them."""
    sample = sampled_entries(
        dict.fromkeys(canonical_category(c) for c in categories),
        limit,
        seed,
        graded=lambda name: name not in RELEVANCE_CATEGORIES,
        include_language_specific_hint=False,
    )
    b = load_bfcl()
    return [
        BfclCase(
            id=str(entry["id"]),
            category=name,
            messages=tuple(entry["question"][0]),
            functions=tuple(entry["function"]),
            ground_truth=tuple(truth) if truth is not None else None,
            hinted_functions=tuple(b.add_language_hint([copy.deepcopy(entry)])[0]["function"]),
        )
        for name, entry, truth in sample
    ]


def sampled_entries(
    categories: Iterable[str],
    limit: int | None,
    seed: int | None,
    *,
    graded: Callable[[str], bool] = lambda name: True,
    **load_options: bool,
) -> list[tuple[str, dict[str, Any], Any]]:
    """(category, BFCL entry, its possible answer) for ``limit`` entries of each category, a
    seeded sample in file order (``seed=None``: the first ``limit``), the same entries for the
    same arguments; the answer is None in categories not ``graded`` (nothing to compare
    with). ConfigError for a limit under 1 and for a graded entry without an answer."""
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be at least 1, got {limit}", param="limit")
    b = load_bfcl()
    sample: list[tuple[str, dict[str, Any], Any]] = []
    for name in categories:
        entries = b.load_dataset_entry(name, include_prereq=False, **load_options)
        answers: dict[str, Any] = {}
        if graded(name):
            answers = {a["id"]: a["ground_truth"] for a in b.load_ground_truth_entry(name)}
        for index in _select(name, len(entries), limit, seed):
            entry = entries[index]
            truth = answers.get(entry["id"]) if answers else None
            if answers and truth is None:
                raise ConfigError(f"BFCL case {entry['id']!r} has no possible answer")
            sample.append((name, entry, truth))
    return sample
