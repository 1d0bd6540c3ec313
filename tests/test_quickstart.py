"""The library's 'ten lines' (examples/quickstart.py) against a real HTTP upstream without tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from toolshim.testing import FakeUpstream, Reply
from toolshim.testing.server import serve_fake

EXAMPLE = Path(__file__).parent.parent / "examples" / "quickstart.py"


def run(base_url: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), base_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_call_an_answer_and_a_corrected_call_from_a_model_that_rejects_tools() -> None:
    fake = FakeUpstream(
        [
            # 1st question: the model first names a tool that does not exist, then corrects itself.
            '{"name": "get_forecast", "arguments": {"city": "Paris"}}',
            '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}',
            # 2nd question: no tool applies.
            Reply("William Shakespeare."),
        ],
        tools="reject",
    )
    with serve_fake(fake) as server:
        lines = run(server.base_url)
    first, second = lines
    assert first.startswith(
        "What's the weather in Paris? -> [('get_weather', '{\"city\": \"Paris\"}')]"
    )
    assert "tool calls emulated" in first and "re-asks 1" in first
    assert second.startswith("Who wrote Hamlet? -> William Shakespeare.")
    sent = fake.history
    assert "tools" in sent[0], "auto mode tries native tools first"
    assert all("tools" not in body for body in sent[1:]), "then never sends them again"
    assert "there is no tool named 'get_forecast'" in sent[2]["messages"][-1]["content"]
