"""`toolshim chat` (in a pseudo-terminal) emulates with the preference an eval stored for the model."""

from __future__ import annotations

from pathlib import Path

from tests.capabilities.test_eval_preferences import DECISION, PYTHONIC, store_eval_pick
from tests.chat.conftest import ChatFactory, Upstream
from toolshim.upstreams.openai_http import normalize_base_url


def test_chat_uses_the_stored_preference(
    chat: ChatFactory, upstream: Upstream, registry_path: Path
) -> None:
    upstream.script(replies=["[]", "Hello there."])
    store_eval_pick(registry_path, normalize_base_url(upstream.base_url), "gemma3:1b")
    session = chat("--model", "gemma3:1b")
    session.expect("Tools: emulated (pythonic)")
    session.prompt("gemma3:1b")
    session.send("hello")
    session.expect("Hello there.")
    session.prompt("gemma3:1b")
    session.ctrl_d()
    assert session.exit_status() == 0
    system = upstream.requests()[0]["messages"][0]["content"]
    assert PYTHONIC in system and DECISION in system
