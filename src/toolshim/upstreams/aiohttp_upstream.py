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

from typing import Any

import aiohttp

from toolshim.upstreams._policy import DEFAULT_CONNECT_TIMEOUT
from toolshim.upstreams._transports import AiohttpTransport
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, OpenAIUpstream

__all__ = ["AiohttpUpstream"]


class AiohttpUpstream(OpenAIUpstream):
    """:class:`OpenAIUpstream` over aiohttp: ``session`` to share one (else one of its own,
    with at most ``max_connections``); the other options are :class:`OpenAIUpstream`'s."""

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int = 256,
        session: aiohttp.ClientSession | None = None,
        **options: Any,
    ) -> None:
        timeout = options.get("timeout", DEFAULT_TIMEOUT)
        connect = options.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        transport = AiohttpTransport(session, timeout, connect, max_connections)
        super().__init__(base_url, transport=transport, **options)
