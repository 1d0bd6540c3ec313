"""Per-request options are bounded and checked; an upstream's Retry-After reaches the caller."""

from __future__ import annotations

import pytest

from tests.server.helpers import chat, proxy
from toolshim.errors import UpstreamStatusError
from toolshim.testing import FakeUpstream


async def test_max_reasks_is_bounded() -> None:
    async with proxy(FakeUpstream(["x"]), mode="force") as p:
        response = await p.client.post(
            "/v1/chat/completions", json=chat(), headers={"x-toolshim-max-reasks": "500"}
        )
    assert response.status_code == 400
    assert "max_reasks must be between 0 and 10" in response.json()["error"]["message"]


@pytest.mark.parametrize("value", ["force", ["force"], 3])
async def test_a_toolshim_field_that_is_not_an_object_is_a_400(value: object) -> None:
    async with proxy(FakeUpstream(["x"])) as p:
        response = await p.client.post("/v1/chat/completions", json=chat(toolshim=value))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "toolshim"


async def test_retry_after_is_passed_on() -> None:
    busy = UpstreamStatusError("rate limited", status=429, retry_after="12")
    async with proxy(FakeUpstream([busy]), mode="off") as p:
        response = await p.client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "12"
    assert response.json()["error"]["message"] == "rate limited"
