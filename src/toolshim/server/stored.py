"""The Responses API's read routes over the proxy's store: ``GET`` and ``DELETE
/v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``, for the caller that stored it.

Another caller's id is answered exactly like an unknown one (the same 404, the same body but
for the id asked). Shapes follow OpenAI's: the ``response`` object; ``{"id", "object":
"response.deleted", "deleted": true}``; a cursor page ``{"object": "list", "data", "first_id",
"last_id", "has_more"}`` of items, newest first unless ``order=asc``, ``limit`` 1–100
(default 20), ``after`` an item id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolshim.errors import InvalidRequestError
from toolshim.responses_store import ResponseStore
from toolshim.server.asgi import JSONBody
from toolshim.server.models import page_limit

__all__ = ["StoredResponses"]

_DEFAULT_LIMIT = 20
_MAX_LIMIT = 100


class StoredResponses:
    """The read routes over ``store``; ``error`` writes an exception as the path's protocol
    writes errors."""

    def __init__(
        self, store: ResponseStore, error: Callable[[BaseException, str], Response]
    ) -> None:
        self.store = store
        self._error = error

    def routes(self) -> list[Route]:
        out = []
        for prefix in ("/v1/responses", "/responses"):
            out.append(Route(f"{prefix}/{{response_id}}", self.response, methods=["GET", "DELETE"]))
            out.append(
                Route(f"{prefix}/{{response_id}}/input_items", self.input_items, methods=["GET"])
            )
        return out

    async def response(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        try:
            if request.method == "DELETE":
                if not self.store.delete(response_id):
                    raise _not_found(response_id)
                return JSONBody({"id": response_id, "object": "response.deleted", "deleted": True})
            found = self.store.get(response_id)
            if found is None:
                raise _not_found(response_id)
            return JSONBody(found)
        except Exception as exc:
            return self._error(exc, request.url.path)

    async def input_items(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        try:
            items = self.store.input_items(response_id)
            if items is None:
                raise _not_found(response_id)
            return JSONBody(_page(response_id, items, request.query_params))
        except Exception as exc:
            return self._error(exc, request.url.path)


def _not_found(response_id: str) -> InvalidRequestError:
    error = InvalidRequestError(
        f"Response with id {response_id!r} not found.", param="response_id", code="not_found"
    )
    error.status = 404
    return error


def _page(response_id: str, items: list[dict[str, Any]], query: Any) -> dict[str, Any]:
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("order must be 'asc' or 'desc'", param="order")
    limit = page_limit(query, _DEFAULT_LIMIT, _MAX_LIMIT)
    data = [{**item, "id": _item_id(response_id, n, item)} for n, item in enumerate(items)]
    if order == "desc":
        data.reverse()
    after = query.get("after")
    if after is not None:
        position = next((n for n, item in enumerate(data) if item["id"] == after), None)
        if position is None:
            raise InvalidRequestError(f"no item {after!r} in this list", param="after")
        data = data[position + 1 :]
    page = data[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(data) > limit,
    }


def _item_id(response_id: str, position: int, item: dict[str, Any]) -> str:
    """The item's own id, else one derived from where it stands (stable across pages)."""
    own = item.get("id")
    if isinstance(own, str) and own:
        return own
    digest = hashlib.sha256(f"{response_id}/{position}".encode()).hexdigest()[:24]
    return f"item_{digest}"
