"""The read routes clients call: models.retrieve (openai and anthropic SDKs), Anthropic's
models page, ``request-id``, and an Anthropic-shaped 404; responses.retrieve / delete /
input_items.list with the real openai SDK."""

from __future__ import annotations

from typing import Any

import openai
import pytest

import anthropic
from tests.anthropic.conftest import live
from tests.server.helpers import sdk
from toolshim.testing import FakeUpstream

UPSTREAM_MODELS = ["qwen2.5:7b", "library/llama3:8b", "m"]


class Listing(FakeUpstream):
    async def list_models(self, *, headers: Any = None) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": 1_700_000_000, "owned_by": "ollama"}
                for m in UPSTREAM_MODELS
            ],
        }


async def test_openai_models_retrieve() -> None:
    async with sdk(Listing()) as client:
        found = await client.models.retrieve("library/llama3:8b")
        with pytest.raises(openai.NotFoundError) as missing:
            await client.models.retrieve("gpt-9")
    assert found.id == "library/llama3:8b" and found.owned_by == "ollama"
    assert missing.value.status_code == 404
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]


async def test_the_anthropic_sdk_lists_and_retrieves_models_in_its_shape() -> None:
    async with live(Listing()) as proxy:
        page = await proxy.client.models.list(limit=2)
        rest = await proxy.client.models.list(after_id=page.last_id or "")
        one = await proxy.client.models.retrieve("qwen2.5:7b")
        raw = await proxy.client.models.with_raw_response.list()
        with pytest.raises(anthropic.NotFoundError) as missing:
            await proxy.client.models.retrieve("claude-9")
    assert [m.id for m in page.data] == UPSTREAM_MODELS[:2] and page.has_more is True
    assert [m.id for m in rest.data] == ["m"] and rest.has_more is False
    assert page.data[0].type == "model" and page.data[0].display_name == "qwen2.5:7b"
    assert one.created_at.year == 2023 and one.display_name == "qwen2.5:7b"
    assert raw.request_id and raw.request_id.startswith("req_")
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert missing.value.request_id


async def test_a_base_url_ending_in_v1_gets_an_anthropic_404_naming_the_routes() -> None:
    """The common mistake: base_url=".../v1" posts to /v1/v1/messages."""
    async with live(FakeUpstream(["hi"])) as proxy:
        client = anthropic.AsyncAnthropic(
            base_url=proxy.url + "/v1", api_key="sk-ant-test", max_retries=0
        )
        with pytest.raises(anthropic.NotFoundError) as caught:
            await client.messages.create(
                model="m", max_tokens=9, messages=[{"role": "user", "content": "hi"}]
            )
        await client.close()
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert "/v1/v1/messages" in body["error"]["message"]  # type: ignore[index]
    assert "POST /v1/messages" in body["error"]["message"]  # type: ignore[index]


async def test_the_openai_sdk_retrieves_deletes_and_lists_a_stored_response() -> None:
    async with sdk(FakeUpstream(["first", "second"])) as client:
        first = await client.responses.create(model="m", input="one")
        second = await client.responses.create(
            model="m", input="two", previous_response_id=first.id
        )
        again = await client.responses.retrieve(second.id)
        items = [i async for i in client.responses.input_items.list(second.id, order="asc")]
        await client.responses.delete(second.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(second.id)
    assert again.output_text == "second" and again.previous_response_id == first.id
    assert [getattr(i, "role", None) for i in items] == ["user", "assistant", "user"]
