"""The remembered tool prompts: the same text as rendering, per tools and options, under threads."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from toolshim.dialects import available_dialects, get_dialect, rendered_tools
from toolshim.dialects._prompt import PromptOptions
from toolshim.types import ToolChoice, ToolSpec


def _tools(default: object) -> list[ToolSpec]:
    schema = {"type": "object", "properties": {"x": {"type": "number", "default": default}}}
    return [ToolSpec(name="f", description="A function.", parameters=schema)]


@pytest.mark.parametrize("name", available_dialects())
def test_a_remembered_prompt_is_the_rendered_one(name: str) -> None:
    dialect = get_dialect(name)
    for options in (PromptOptions(), PromptOptions(ToolChoice.REQUIRED, parallel=False)):
        tools = _tools(1)
        assert rendered_tools(dialect, tools, options) == dialect.render_tools(tools, options)
        assert rendered_tools(dialect, tools, options) == dialect.render_tools(tools, options)


def test_schemas_that_differ_only_by_nan_or_null_get_their_own_prompts() -> None:
    dialect = get_dialect("json")
    options = PromptOptions()
    with_null = rendered_tools(dialect, _tools(None), options)
    with_nan = rendered_tools(dialect, _tools(float("nan")), options)
    assert with_nan == dialect.render_tools(_tools(float("nan")), options)
    assert with_null != with_nan


@pytest.fixture
def fast_switching() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.usefixtures("fast_switching")
def test_threads_filling_the_cache_past_its_size_never_fail() -> None:
    dialect = get_dialect("json")
    errors: list[BaseException] = []

    def fill(thread: int) -> None:
        try:
            for i in range(6000):
                rendered_tools(dialect, [ToolSpec(name=f"t{thread}_{i}")], PromptOptions())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
