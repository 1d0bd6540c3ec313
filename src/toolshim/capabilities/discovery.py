"""Discovery: read what an upstream says about its models (source ``upstream``).

Which server is behind a base URL is found by asking, in order:

* Ollama — ``GET <root>/api/version``; models from ``GET <root>/api/tags``; per model
  ``POST <root>/api/show {"model": name}`` → ``capabilities`` (``"tools"`` or not; older
  Ollama without that field: whether the template uses ``.Tools``), the context length in
  ``model_info`` and the parameter size in ``details``. Ollama ignores ``tool_choice``
  (ollama/ollama#8421), which is recorded too.
* LM Studio — ``GET <root>/api/v0/models`` → ``capabilities: ["tool_use"]`` and
  ``max_context_length``.
* llama-server — ``GET <root>/props`` → the served context size.
* anything else — ``GET <base>/models``; entries may carry OpenRouter's ``supported_parameters``
  and ``context_length`` or vLLM's ``max_model_len``.

``<root>`` is the base URL without its ``/v1``. Timeouts are short; a model whose details
cannot be read is reported, not fatal. Nothing here writes anywhere: :func:`apply_discovery`
stores a discovery in a registry.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamStatusError,
    UpstreamTimeoutError,
    upstream_error_fields,
)
from toolshim.upstreams.openai_http import normalize_base_url

__all__ = [
    "DiscoveredModel",
    "Discovery",
    "Listing",
    "apply_discovery",
    "discover",
    "list_upstream_models",
    "parse_parameter_size",
    "refresh",
    "server_root",
]

log = logging.getLogger("toolshim.capabilities")

DEFAULT_TIMEOUT = 2.0
"""Seconds per discovery request (seed 004's startup refresh uses 2 s)."""

OLLAMA_TOOL_CHOICE = "Ollama ignores tool_choice (ollama/ollama#8421)"


@dataclass
class DiscoveredModel:
    """What the upstream says about one model: fact name → (value, detail)."""

    name: str
    facts: dict[str, tuple[Any, str]] = field(default_factory=dict)
    error: str | None = None


@dataclass
class Listing:
    """The models an upstream lists, and which kind of server it is."""

    base_url: str
    server: str
    models: list[str]
    entries: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    props: Mapping[str, Any] | None = None
    """llama-server's ``/props`` answer, when that is the server."""


@dataclass
class Discovery:
    """A listing plus each model's facts."""

    base_url: str
    server: str
    models: list[DiscoveredModel]

    @property
    def problems(self) -> list[str]:
        return [f"{m.name}: {m.error}" for m in self.models if m.error]

    def as_dict(self) -> dict[str, Any]:
        """The discovery as JSON (what ``toolshim models refresh --json`` prints)."""
        return {
            "upstream": self.base_url,
            "server": self.server,
            "models": [
                {
                    "model": m.name,
                    "error": m.error,
                    "facts": {k: {"value": v, "detail": d} for k, (v, d) in m.facts.items()},
                }
                for m in self.models
            ],
            "problems": self.problems,
        }


def server_root(base_url: str) -> str:
    """``http://host:11434/v1`` → ``http://host:11434`` (where Ollama's native API lives)."""
    return normalize_base_url(base_url).removesuffix("/v1")


def parse_parameter_size(text: str) -> float | None:
    """Ollama's ``details.parameter_size`` (``"494.03M"``, ``"7.6B"``) as a number."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMBT])\s*", str(text), re.IGNORECASE)
    if match is None:
        return None
    scale = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[match.group(2).upper()]
    return float(match.group(1)) * scale


class _Inspector:
    """Asks one upstream about itself over one httpx client."""

    def __init__(
        self, base_url: str, client: httpx.AsyncClient, timeout: float, api_key: str | None
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self.root = server_root(base_url)
        self.client = client
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def _json(self, method: str, url: str, body: Any = None, *, strict: bool = False) -> Any:
        """The JSON answer, or None for an HTTP error (raised when ``strict``) or a body that
        is not JSON.

        Connection failures and timeouts raise: discovery cannot go on without the upstream.
        """
        try:
            response = await self.client.request(
                method, url, json=body, headers=self.headers, timeout=self.timeout
            )
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError(
                f"the upstream at {self.base_url} did not answer within {self.timeout:g} s "
                f"(asked {url})",
                url=url,
            ) from exc
        except httpx.HTTPError as exc:
            raise UpstreamConnectionError(
                f"could not reach the upstream at {self.base_url} ({exc}; asked {url})", url=url
            ) from exc
        if response.status_code >= 400:
            if strict:
                message = upstream_error_fields(_body(response)).get("message")
                raise UpstreamStatusError(
                    f"{method} {url} answered HTTP {response.status_code}: {message or 'no message'}",
                    status=response.status_code,
                    url=url,
                )
            return None
        try:
            return response.json()
        except ValueError:
            return None

    async def listing(self) -> Listing:
        version = await self._json("GET", f"{self.root}/api/version")
        if isinstance(version, Mapping) and "version" in version:
            tags = await self._json("GET", f"{self.root}/api/tags")
            rows = tags.get("models", []) if isinstance(tags, Mapping) else []
            entries = {
                str(r.get("name") or r.get("model")): r for r in rows if isinstance(r, Mapping)
            }
            return Listing(self.base_url, "ollama", sorted(entries), entries)
        lmstudio = await self._json("GET", f"{self.root}/api/v0/models")
        if _looks_like_lmstudio(lmstudio):
            entries = {str(r["id"]): r for r in lmstudio["data"] if isinstance(r, Mapping)}
            models = [m for m, r in entries.items() if r.get("type") != "embeddings"]
            return Listing(self.base_url, "lm-studio", sorted(models), entries)
        props = await self._json("GET", f"{self.root}/props")
        listed = await self._json("GET", f"{self.base_url}/models", strict=True)
        rows = listed.get("data", []) if isinstance(listed, Mapping) else []
        entries = {str(r["id"]): r for r in rows if isinstance(r, Mapping) and "id" in r}
        if isinstance(props, Mapping) and "default_generation_settings" in props:
            return Listing(self.base_url, "llama-server", sorted(entries), entries, props)
        return Listing(self.base_url, "openai-compatible", sorted(entries), entries)

    async def model_facts(self, listing: Listing, name: str) -> DiscoveredModel:
        found = DiscoveredModel(name)
        if listing.server == "ollama":
            show = await self._json("POST", f"{self.root}/api/show", {"model": name, "name": name})
            if not isinstance(show, Mapping):
                found.error = "/api/show gave no answer for this model"
                return found
            found.facts.update(_ollama_facts(show))
            found.facts["tool_choice"] = ("no", OLLAMA_TOOL_CHOICE)
            return found
        entry = listing.entries.get(name, {})
        if listing.server == "lm-studio":
            found.facts.update(_lmstudio_facts(entry))
        else:
            found.facts.update(_listing_facts(entry, listing.props))
        return found


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _looks_like_lmstudio(data: Any) -> bool:
    if not isinstance(data, Mapping) or not isinstance(data.get("data"), list):
        return False
    rows = [r for r in data["data"] if isinstance(r, Mapping)]
    return bool(rows) and all("id" in r and ("type" in r or "arch" in r) for r in rows)


def _ollama_facts(show: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    facts: dict[str, tuple[Any, str]] = {}
    capabilities = show.get("capabilities")
    if isinstance(capabilities, list):
        has = "tools" in capabilities
        facts["native_tools"] = (
            "yes" if has else "no",
            f"Ollama /api/show capabilities: {', '.join(map(str, capabilities)) or 'none'}",
        )
    elif isinstance(show.get("template"), str):
        has = ".Tools" in show["template"]
        facts["native_tools"] = (
            "yes" if has else "no",
            "Ollama /api/show template "
            + ("renders .Tools" if has else "has no .Tools (this Ollama reports no capabilities)"),
        )
    info = show.get("model_info")
    if isinstance(info, Mapping):
        for key, value in info.items():
            if str(key).endswith(".context_length") and isinstance(value, int) and value > 0:
                facts["context_window"] = (value, f"Ollama /api/show model_info {key}")
                break
    details = show.get("details")
    if isinstance(details, Mapping):
        size = parse_parameter_size(str(details.get("parameter_size", "")))
        if size is not None and size < 1e9:
            facts["dialect"] = (
                "compact",
                f"Ollama /api/show parameter_size {details['parameter_size']} (under 1B)",
            )
    return facts


def _lmstudio_facts(entry: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    facts: dict[str, tuple[Any, str]] = {}
    capabilities = entry.get("capabilities")
    if isinstance(capabilities, list) and "tool_use" in capabilities:
        facts["native_tools"] = ("yes", "LM Studio /api/v0/models capabilities: tool_use")
    context = entry.get("max_context_length")
    if isinstance(context, int) and context > 0:
        facts["context_window"] = (context, "LM Studio /api/v0/models max_context_length")
    return facts


def _listing_facts(
    entry: Mapping[str, Any], props: Mapping[str, Any] | None
) -> dict[str, tuple[Any, str]]:
    facts: dict[str, tuple[Any, str]] = {}
    params = entry.get("supported_parameters")
    if isinstance(params, list):
        listed = "supported_parameters " + ", ".join(map(str, params))
        facts["native_tools"] = ("yes" if "tools" in params else "no", f"/models {listed}")
        facts["tool_choice"] = ("yes" if "tool_choice" in params else "no", f"/models {listed}")
        structured = "structured_outputs" in params
        facts["structured_output"] = ("yes" if structured else "no", f"/models {listed}")
    for key in ("context_length", "max_model_len"):
        value = entry.get(key)
        if isinstance(value, int) and value > 0:
            facts["context_window"] = (value, f"/models {key}")
            break
    if props is not None:
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, Mapping) else None
        if isinstance(n_ctx, int) and n_ctx > 0:
            facts["context_window"] = (n_ctx, "llama-server /props n_ctx")
    return facts


async def list_upstream_models(
    base_url: str,
    *,
    client: httpx.AsyncClient | None = None,
    request_timeout: float = DEFAULT_TIMEOUT,
    api_key: str | None = None,
) -> Listing:
    """Which server is at ``base_url`` and which models it lists.

    Raises :class:`~toolshim.errors.UpstreamConnectionError` or
    :class:`~toolshim.errors.UpstreamTimeoutError` when the upstream cannot be asked at all.
    """
    async with _client(client) as http:
        return await _Inspector(base_url, http, request_timeout, api_key).listing()


async def discover(
    base_url: str,
    *,
    models: list[str] | None = None,
    client: httpx.AsyncClient | None = None,
    request_timeout: float = DEFAULT_TIMEOUT,
    api_key: str | None = None,
    concurrency: int = 4,
    on_model: Callable[[DiscoveredModel], None] | None = None,
) -> Discovery:
    """What the upstream says about each of its models (or only ``models``).

    A model whose details time out or fail is returned with ``error`` set; ``on_model`` is
    called as each model is done (for progress output).
    """
    async with _client(client) as http:
        inspector = _Inspector(base_url, http, request_timeout, api_key)
        listing = await inspector.listing()
        names = list(models) if models else listing.models
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(name: str) -> DiscoveredModel:
            async with gate:
                try:
                    found = await inspector.model_facts(listing, name)
                except (UpstreamTimeoutError, UpstreamConnectionError) as exc:
                    found = DiscoveredModel(name, error=exc.message)
            if on_model is not None:
                on_model(found)
            return found

        results = await asyncio.gather(*(one(n) for n in names))
    return Discovery(listing.base_url, listing.server, list(results))


async def refresh(
    registry: Registry,
    base_url: str,
    *,
    request_timeout: float = DEFAULT_TIMEOUT,
    api_key: str | None = None,
) -> Discovery | None:
    """Seed 004's startup refresh: discover and store, never raise.

    Meant to run in the background when a server or chat session starts; an upstream that
    cannot be asked is logged as a warning and None is returned.
    """
    try:
        found = await discover(base_url, request_timeout=request_timeout, api_key=api_key)
    except UpstreamError as exc:
        log.warning("could not refresh model facts from %s: %s", base_url, exc.message)
        return None
    stored = apply_discovery(registry, normalize_base_url(base_url), found)
    log.info("refreshed %d facts about %d models at %s", stored, len(found.models), base_url)
    for problem in found.problems:
        log.warning("could not read %s", problem)
    return found


def apply_discovery(registry: Registry, upstream: str, discovery: Discovery) -> int:
    """Store every discovered fact with source ``upstream``; return how many were stored."""
    stored = 0
    for model in discovery.models:
        for name, (value, detail) in model.facts.items():
            registry.learn(upstream, model.name, name, value, Source.UPSTREAM, detail=detail)
            stored += 1
    registry.record_seen(upstream, [m.name for m in discovery.models if m.error is None])
    return stored


@asynccontextmanager
async def _client(client: httpx.AsyncClient | None) -> AsyncIterator[httpx.AsyncClient]:
    """Use the caller's client, or own a short-lived one."""
    if client is not None:
        yield client
        return
    async with httpx.AsyncClient() as owned:
        yield owned
