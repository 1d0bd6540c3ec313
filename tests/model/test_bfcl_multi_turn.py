"""One BFCL multi-turn case end to end on the embedded 0.5B, served as ``toolshim serve`` serves
it: the conversation completes and BFCL's checker scores it (whether it passes is the model's
business, measured in docs/results.md)."""

from __future__ import annotations

import asyncio

import pytest

from tests.model.conftest import _why_unavailable
from toolshim.evaluation import bfcl_available
from toolshim.evaluation.bfcl_multi_turn import load_multi_turn_cases
from toolshim.evaluation.multi_turn_runner import MultiTurnRecord, MultiTurnRunner
from toolshim.evaluation.runner import EvalConfig
from toolshim.local import EmbeddedServer, ensure_default_model
from toolshim.upstreams.openai_http import OpenAIUpstream

pytestmark = pytest.mark.model

ONE_API_TWO_TURNS = "multi_turn_base_3"
"""Two user turns on BFCL's simulated file system alone (the smallest tool list)."""


@pytest.mark.skipif(bfcl_available() is not None, reason=f"{bfcl_available()}")
def test_a_multi_turn_case_completes_and_is_scored_on_the_embedded_model() -> None:
    reason = _why_unavailable()
    if reason:
        pytest.skip(reason)
    (case,) = [
        c
        for c in load_multi_turn_cases(["multi_turn_base"], limit=4, seed=None)
        if c.id == ONE_API_TWO_TURNS
    ]
    # The file system's 18 function docs alone are ~3k tokens rendered: more than the
    # session model's 4096 once the turns and results are in.
    with EmbeddedServer(ensure_default_model(), ctx_size=12288) as server:

        async def go() -> list[MultiTurnRecord]:
            upstream = OpenAIUpstream(server.base_url, key=server.key, timeout=600)
            runner = MultiTurnRunner(
                upstream,
                server.model,
                [EvalConfig.parse("auto+served")],
                max_tokens=160,
                max_steps=2,
                budget=600,
                served_facts=server.record_capabilities,
            )
            try:
                return list(await runner.run([case]))
            finally:
                await runner.aclose()
                await upstream.aclose()

        (record,) = asyncio.run(go())
    assert record.failure not in {"error", "hang"}, record.error
    assert 1 <= record.turns <= 2
    assert record.llm_calls >= record.steps >= record.turns
    assert record.prompt_tokens > 1000 and record.seconds > 0
    assert record.valid or record.failure
