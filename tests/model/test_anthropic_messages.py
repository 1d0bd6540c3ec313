"""The embedded model behind ``/v1/messages``: the anthropic SDK gets a valid ``tool_use``
block (emulated), the same streamed and not, answers a tool result in text, and
``count_tokens`` uses llama-server's own tokenizer."""

from __future__ import annotations

import pytest

from tests.anthropic.conftest import blocks, live
from toolshim.local import EmbeddedServer
from toolshim.testing import WEATHER_ANTHROPIC as WEATHER
from toolshim.upstreams.openai_http import OpenAIUpstream

pytestmark = pytest.mark.model

ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]
GREEDY = {"temperature": 0}


async def test_messages_on_the_embedded_model(qwen: EmbeddedServer) -> None:
    upstream = OpenAIUpstream(qwen.base_url, key=qwen.key)
    async with live(upstream, mode="force", dialect="hermes") as proxy:
        created = await proxy.client.messages.create(
            model=qwen.model, max_tokens=80, messages=ASK, tools=[WEATHER], extra_body=GREEDY
        )
        async with proxy.client.messages.stream(
            model=qwen.model, max_tokens=80, messages=ASK, tools=[WEATHER], extra_body=GREEDY
        ) as stream:
            streamed = await stream.get_final_message()
        call = created.content[-1]
        assert call.type == "tool_use"
        assert call.id.startswith("toolu_emulated_")
        assert call.name == "get_weather"
        assert "paris" in str(call.input.get("city", "")).lower()
        assert created.stop_reason == streamed.stop_reason == "tool_use"
        assert blocks(created)[-1] == blocks(streamed)[-1]
        assert created.model_extra["toolshim"]["emulated"] is True

        answered = await proxy.client.messages.create(
            model=qwen.model,
            max_tokens=100,
            messages=[
                *ASK,
                {"role": "assistant", "content": [call.to_dict()]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call.id,
                            "content": "18°C, light rain",
                        }
                    ],
                },
            ],
            extra_body=GREEDY,  # (no tools offered: the 0.5B model would repeat its call)
        )
        assert answered.stop_reason in ("end_turn", "max_tokens")
        assert answered.content and answered.content[0].type == "text"

        counted = await proxy.client.messages.count_tokens(model=qwen.model, messages=ASK)
        assert counted.model_extra["toolshim"] == {"token_count": "upstream"}
        assert 5 <= counted.input_tokens <= 20
