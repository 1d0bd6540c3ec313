"""The HTTP adapter over one pooled aiohttp session: the proxy's upstream client.

It is :class:`~toolshim.upstreams.openai_http.OpenAIUpstream` (the one adapter: headers,
deadlines, retries, error mapping, SSE) on the aiohttp transport
(:class:`~toolshim.upstreams._transports.AiohttpTransport`). The proxy uses it because,
measured side by side on a 2-core machine, a pass-through over aiohttp kept about ten times the
throughput of one over httpx (see benchmarks/bench_proxy.py), and it costs less CPU per request
(benchmarks/bench_proxy_cpu.py).

The session is created lazily inside the running event loop, so the object can be built
before the loop starts (as ``toolshim serve`` does). ``timeout`` bounds the wait for each read
from the upstream, ``connect_timeout`` the connection and ``total_timeout`` the whole request
(see :mod:`toolshim.upstreams._policy`, which also says which failures are retried).
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from toolshim.upstreams._policy import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_RETRIES,
    DEFAULT_TOTAL_TIMEOUT,
    RetryPolicy,
)
from toolshim.upstreams._sse import DEFAULT_MAX_EVENT_BYTES
from toolshim.upstreams._transports import AiohttpTransport
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, OpenAIUpstream

__all__ = ["AiohttpUpstream"]


class AiohttpUpstream(OpenAIUpstream):
    """:class:`OpenAIUpstream` over aiohttp: ``session`` to share one (else one of its own,
    with at most ``max_connections``)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
        retries: int | RetryPolicy = DEFAULT_RETRIES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 256,
        session: aiohttp.ClientSession | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            total_timeout=total_timeout,
            retries=retries,
            max_event_bytes=max_event_bytes,
            headers=headers,
            key=key,
            transport=AiohttpTransport(session, timeout, connect_timeout, max_connections),
        )
