"""The proxy's ASGI app: protocol routes (see :mod:`.routes`), the other endpoints, request
ids, errors in the shape of the protocol a path belongs to, shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, assert_never

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolshim import __version__
from toolshim.engine import Engine
from toolshim.errors import InvalidRequestError, StoreError, UpstreamError, UpstreamStatusError
from toolshim.responses_store import ResponseStore
from toolshim.server.asgi import (
    EMULATED_HEADER,
    JSONBody,
    emulated_value,
    error_meta,
    forwarded_headers,
    log_failure,
    send_json,
)
from toolshim.server.auth import AccessKeys
from toolshim.server.endpoint import ProtocolEndpoint, ServerSettings
from toolshim.server.guard import KEY_NAME, Guard
from toolshim.server.limits import LimitLog, Limits
from toolshim.server.logs import REQUEST_ID, REQUEST_SECRETS, new_request_id, request_secrets
from toolshim.server.metrics import CONTENT_TYPE_LATEST, Metrics, ObservedUpstream
from toolshim.server.model_aliases import ModelAlias
from toolshim.server.models import anthropic_model, anthropic_page, find_model, model_not_found
from toolshim.server.routes import ANTHROPIC_CLIENT, PROTOCOLS, Kind, codec_for_path
from toolshim.server.stored import StoredResponses
from toolshim.wire.base import Codec

__all__ = ["ROUTES", "ProxyApp", "create_app"]

log = logging.getLogger("toolshim.server")

ROUTES = (
    *(f"POST {route.path}" for route in PROTOCOLS),
    "GET /v1/responses/{id}",
    "DELETE /v1/responses/{id}",
    "GET /v1/responses/{id}/input_items",
    "GET /v1/models",
    "GET /v1/models/{id}",
    "GET /healthz",
    "GET /metrics",
)


def create_app(
    engine: Engine,
    *,
    upstream_api_key: str | None = None,
    default_model: str | None = None,
    pin_model: bool = False,
    model_aliases: Sequence[ModelAlias] = (),
    context_hint: str | None = None,
    health_timeout: float = 2.0,
    metrics: Metrics | None = None,
    limits: Limits | None = None,
    auth_keys: AccessKeys | None = None,
    admin_keys: Collection[str] = (),
    mcp_allow: Sequence[str] = (),
) -> ProxyApp:
    """The OpenAI-compatible proxy in front of ``engine``'s upstream, as an ASGI app.

    ``upstream_api_key`` replaces the caller's ``Authorization`` header upstream.
    ``default_model`` serves requests that name no model; with ``pin_model`` every request
    goes to it (an upstream that serves one model, like the embedded llama-server).
    ``model_aliases`` send requests naming a matching model to the alias's target;
    ``context_hint`` is added to the error of a request over the model's context window.
    The app serves a copy of the engine whose upstream is wrapped to time its calls for
    ``/metrics`` (the engine passed in is left as it is); it is closed when the app shuts down.
    ``limits`` bound every request (see :class:`Limits`); with ``auth_keys`` every route but
    ``/healthz`` needs one of the keys, and the caller's key is never forwarded upstream;
    ``/metrics`` shows per-key series to the keys named in ``admin_keys`` only, and
    ``/healthz`` the upstream's address only to a caller with a key (when there are keys).
    ``mcp_allow`` lists the URL prefixes of the MCP servers the proxy may reach to run a
    Responses request's ``mcp`` tools itself (:mod:`toolshim.server.hosted_mcp`).
    """
    metrics = metrics or Metrics()
    if not isinstance(engine.upstream, ObservedUpstream):
        engine = engine.with_upstream(ObservedUpstream(engine.upstream, metrics))
    settings = ServerSettings(
        upstream_api_key=upstream_api_key,
        default_model=default_model,
        pin_model=pin_model,
        model_aliases=tuple(model_aliases),
        context_hint=context_hint,
        health_timeout=health_timeout,
        limits=limits or Limits(),
        mcp_allow=tuple(mcp_allow),
    )
    endpoints = _Endpoints(
        engine, metrics, settings, keyed=auth_keys is not None, admins=frozenset(admin_keys)
    )

    stores: list[ResponseStore] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for store in stores:  # the answers' indexes wait in memory: written before closing
                try:
                    store.close()
                except StoreError as exc:
                    log.warning("the stored responses' indexes were not written: %s", exc.message)
            await engine.aclose()

    starlette = Starlette(
        routes=[
            Route("/v1/models", endpoints.models, methods=["GET"]),
            Route("/models", endpoints.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", endpoints.model, methods=["GET"]),
            Route("/models/{model_id:path}", endpoints.model, methods=["GET"]),
            Route("/healthz", endpoints.healthz, methods=["GET"]),
            Route("/metrics", endpoints.metrics, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
        lifespan=lifespan,
    )
    handlers: dict[str, ASGIApp] = {}
    bound = {id(r.codec): _bind(r.codec, engine, settings) for r in PROTOCOLS}
    for route in PROTOCOLS:
        handler = _handler(route.kind, bound[id(route.codec)], engine, metrics, settings)
        handlers.update(dict.fromkeys(route.paths, handler))
    for codec in bound.values():  # the Responses API's stored answers: their read routes
        store = getattr(codec, "store", None)
        if isinstance(store, ResponseStore):
            stores.append(store)
            starlette.router.routes.extend(StoredResponses(store, error_response).routes())
    return ProxyApp(handlers, starlette, engine, metrics, settings, auth_keys)


def _bind(codec: Codec, engine: Engine, settings: ServerSettings) -> Codec:
    """The codec for this app: one with state per app (a store) is made for ``engine``."""
    bind = getattr(codec, "for_engine", None)
    return bind(engine, **settings.limits.response_store_bounds()) if bind else codec


def _handler(
    kind: Kind, codec: Codec, engine: Engine, metrics: Metrics, settings: ServerSettings
) -> ASGIApp:
    match kind:
        case Kind.SERVE:
            return ProtocolEndpoint(codec, engine, metrics, settings)
        case Kind.COUNT_TOKENS:
            from toolshim.server.tokens import CountTokens

            return CountTokens(codec, engine, settings)
        case _:
            assert_never(kind)


class ProxyApp:
    """The proxy's ASGI app: protocol routes on a lean path, every other route via Starlette.

    Each HTTP request gets an id (the caller's ``x-request-id`` when it is a sane token) that
    tags its log lines and comes back in the ``x-request-id`` response header. Every request,
    whatever its route, goes through one :class:`~toolshim.server.guard.Guard` (keys, limits,
    drain); :attr:`limit_log` is shared with the connection-level limits of ``toolshim serve``.
    """

    def __init__(
        self,
        handlers: dict[str, ASGIApp],
        starlette: Starlette,
        engine: Engine,
        metrics: Metrics,
        settings: ServerSettings,
        auth_keys: AccessKeys | None = None,
    ) -> None:
        self.handlers = handlers
        """The protocol routes' handlers by path (POST only)."""
        self.starlette = starlette
        self.engine = engine
        self.metrics = metrics
        self.settings = settings
        self.limits = settings.limits
        self.limit_log = LimitLog(on_hit=metrics.count_limit_hit)
        self.guard = Guard(
            self._route,
            self.limits,
            keys=auth_keys,
            limit_log=self.limit_log,
            on_key=metrics.count_key,
        )

    def drain(self, timeout: float | None = None) -> None:
        """Stop taking requests and cut those still running after ``timeout`` seconds (the
        limits' ``drain_timeout`` by default); see :meth:`Guard.drain`."""
        self.guard.drain(timeout)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.starlette(scope, receive, send)
            return
        offered = None
        anthropic = False
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                offered = value.decode("latin-1")
            elif name == b"anthropic-version":
                anthropic = True
        token = REQUEST_ID.set(new_request_id(offered))
        secrets_token = REQUEST_SECRETS.set(request_secrets(scope["headers"]))
        client_token = ANTHROPIC_CLIENT.set(anthropic)
        try:
            await self.guard(scope, receive, _with_request_id(send))
        finally:
            ANTHROPIC_CLIENT.reset(client_token)
            REQUEST_SECRETS.reset(secrets_token)
            REQUEST_ID.reset(token)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get(scope["path"])
        if handler is None:
            await self.starlette(scope, receive, send)
        elif scope["method"] == "POST":
            await handler(scope, receive, send)
        else:
            await _wrong_method(scope, send)


def _with_request_id(send: Send) -> Send:
    """``send`` that puts the request id on every response: ``x-request-id`` (where the route
    did not) and ``request-id`` (what the anthropic SDK reads)."""

    def sending(message: Message) -> Awaitable[None]:
        # a plain function handing back send's awaitable: no coroutine of its own per message
        # (a streamed answer sends one per chunk)
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            names = {name.lower() for name, _ in headers}
            rid = REQUEST_ID.get().encode("latin-1")
            if b"x-request-id" not in names:
                headers.append((b"x-request-id", rid))
            if b"request-id" not in names:
                headers.append((b"request-id", rid))
            message = {**message, "headers": headers}
        return send(message)

    return sending


async def _wrong_method(scope: Scope, send: Send) -> None:
    error = InvalidRequestError(
        f"{scope['method']} is not allowed on {scope['path']}; send a POST with a JSON body"
    )
    error.status = 405
    status, body = codec_for_path(scope["path"]).error(error)
    log_failure(error, status)
    await send_json(send, status, body, [(b"allow", b"POST")])


def error_response(exc: BaseException, path: str) -> Response:
    """The error response for ``exc`` in the shape of the protocol ``path`` belongs to."""
    status, body = codec_for_path(path).error(exc)
    log_failure(exc, status)
    headers = {"x-request-id": REQUEST_ID.get()}
    meta = error_meta(exc)
    if meta is not None:
        headers[EMULATED_HEADER.decode()] = emulated_value(meta).decode()
    return JSONBody(body, status_code=status, headers=headers)


@dataclass(eq=False)
class _Endpoints:
    """``/v1/models`` (and ``/v1/models/{id}``), ``/healthz`` and ``/metrics``."""

    engine: Engine
    _metrics: Metrics
    settings: ServerSettings
    _: KW_ONLY
    keyed: bool = False
    """Access keys are required: the upstream's address is shown only to a key holder."""
    admins: frozenset[str] = frozenset()
    """Names of the keys that see per-key series on ``/metrics``."""
    _checks: dict[tuple[tuple[str, str], ...], asyncio.Task[dict[str, Any]]] = field(
        default_factory=dict, init=False, repr=False
    )
    """Upstream checks in flight, by the headers they carry: probes that arrive meanwhile
    share one (``/healthz`` needs no key, so a flood of them must not each ask the
    upstream)."""

    async def models(self, request: Request) -> Response:
        headers = forwarded_headers(request.headers, self.settings.upstream_api_key)
        try:
            listing = await self.engine.upstream.list_models(headers=headers)
        except Exception as exc:
            return error_response(exc, request.url.path)
        if ANTHROPIC_CLIENT.get():
            try:
                return JSONBody(anthropic_page(listing, request.query_params))
            except Exception as exc:
                return error_response(exc, request.url.path)
        return JSONBody(listing)

    async def model(self, request: Request) -> Response:
        """``GET /v1/models/{id}``: the upstream's entry for it, in the asker's shape."""
        model_id = request.path_params["model_id"]
        headers = forwarded_headers(request.headers, self.settings.upstream_api_key)
        try:
            entry = find_model(await self.engine.upstream.list_models(headers=headers), model_id)
            if entry is None:
                raise model_not_found(model_id)
        except Exception as exc:
            return error_response(exc, request.url.path)
        return JSONBody(anthropic_model(entry) if ANTHROPIC_CLIENT.get() else entry)

    async def healthz(self, request: Request) -> Response:
        headers = forwarded_headers(request.headers, self.settings.upstream_api_key)
        key = tuple(sorted(headers.items()))
        check = self._checks.get(key)
        if check is None:
            check = self._checks[key] = asyncio.create_task(self._check_upstream(headers))
            check.add_done_callback(lambda _: self._checks.pop(key, None))
        upstream = await asyncio.shield(check)
        if self.keyed and KEY_NAME.get() == "-":  # no key: no address (nor in an error)
            url = str(upstream.get("url") or "")
            upstream = {k: v for k, v in upstream.items() if k != "url"}
            if url and isinstance(upstream.get("error"), str):
                upstream["error"] = upstream["error"].replace(url, "the upstream")
        return JSONBody(
            {
                "status": "ok",
                "version": __version__,
                "mode": self.engine.options.mode.value,
                "upstream": upstream,
            }
        )

    async def _check_upstream(self, headers: dict[str, str]) -> dict[str, Any]:
        """What ``/healthz`` says of the upstream: reachable or not, why, and how fast."""
        upstream: dict[str, Any] = {"url": self.engine.upstream.key}
        started = time.perf_counter()
        try:
            await asyncio.wait_for(
                self.engine.upstream.list_models(headers=headers), self.settings.health_timeout
            )
            upstream["reachable"] = True
        except UpstreamStatusError as exc:  # it answered, with an error (e.g. a missing key)
            upstream["reachable"] = True
            upstream["error"] = f"HTTP {exc.status}: {exc.message}"
        except TimeoutError:
            upstream["reachable"] = False
            upstream["error"] = f"no answer within {self.settings.health_timeout:g}s"
        except UpstreamError as exc:
            upstream["reachable"] = False
            upstream["error"] = exc.message
        except Exception as exc:  # a bug on the way to the upstream: health says so, no 500
            log_failure(exc, 500)
            upstream["reachable"] = False
            upstream["error"] = f"internal error ({type(exc).__name__}); see the toolshim log"
        if upstream["reachable"]:
            upstream["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return upstream

    async def metrics(self, request: Request) -> Response:
        per_key = KEY_NAME.get() in self.admins
        return Response(self._metrics.render(per_key=per_key), media_type=CONTENT_TYPE_LATEST)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (unknown route, wrong method) in the OpenAI error shape."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}; the proxy serves: " + ", ".join(
            ROUTES
        )
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}; the proxy serves: " + (
            ", ".join(ROUTES)
        )
    else:
        message = str(exc.detail)
    error = InvalidRequestError(message, code="not_found" if exc.status_code == 404 else None)
    error.status = exc.status_code
    return error_response(error, request.url.path)


async def _internal_error(request: Request, exc: Exception) -> Response:
    return error_response(exc, request.url.path)
