"""``GET /v1/models`` and ``GET /v1/models/{id}`` in the shape of the protocol that asks.

The upstream's listing (OpenAI's ``{"object": "list", "data": [{"id", "object", "created",
"owned_by"}]}``) is served as it came to OpenAI clients. A request that carries an
``anthropic-version`` header (every anthropic SDK request does) gets Anthropic's shapes: a page
``{"data": [{"type": "model", "id", "display_name", "created_at"}], "first_id", "last_id",
"has_more"}`` (``limit`` 1–1000, default 20; ``after_id``, ``before_id``) and one
``ModelInfo`` per id; ``created_at`` is RFC 3339 from the upstream's ``created`` (the epoch
when it gave none). An unknown id is a 404 in the asker's error shape.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from toolshim.errors import InvalidRequestError

__all__ = ["anthropic_model", "anthropic_page", "find_model", "model_not_found"]

_DEFAULT_LIMIT = 20
_MAX_LIMIT = 1000


def _entries(listing: Any) -> list[Mapping[str, Any]]:
    data = listing.get("data") if isinstance(listing, Mapping) else None
    if not isinstance(data, list):
        return []
    return [m for m in data if isinstance(m, Mapping) and isinstance(m.get("id"), str)]


def find_model(listing: Any, model_id: str) -> dict[str, Any] | None:
    """The upstream's entry for ``model_id`` (OpenAI's model object), or None."""
    for entry in _entries(listing):
        if entry["id"] == model_id:
            return {"object": "model", "created": 0, "owned_by": "upstream", **entry}
    return None


def model_not_found(model_id: str) -> InvalidRequestError:
    error = InvalidRequestError(
        f"The model {model_id!r} does not exist (not in the upstream's /v1/models)",
        param="model",
        code="model_not_found",
    )
    error.status = 404
    return error


def anthropic_model(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI model object as Anthropic's ``ModelInfo``."""
    created = entry.get("created")
    seconds = created if isinstance(created, int | float) and created > 0 else 0
    when = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return {
        "type": "model",
        "id": entry["id"],
        "display_name": str(entry.get("display_name") or entry["id"]),
        "created_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def page_limit(query: Mapping[str, str], default: int, most: int) -> int:
    """A list request's ``limit`` (``default`` when it gives none); 400 unless it is a whole
    number from 1 to ``most``."""
    try:
        limit = int(query.get("limit", default))
    except ValueError:
        limit = 0
    if not 1 <= limit <= most:
        raise InvalidRequestError(f"limit must be an integer from 1 to {most}", param="limit")
    return limit


def anthropic_page(listing: Any, query: Mapping[str, str]) -> dict[str, Any]:
    """The upstream's listing as Anthropic's page of ``ModelInfo``."""
    limit = page_limit(query, _DEFAULT_LIMIT, _MAX_LIMIT)
    models = [anthropic_model(e) for e in _entries(listing)]
    ids = [m["id"] for m in models]
    after, before = query.get("after_id"), query.get("before_id")
    if after is not None:
        models = models[ids.index(after) + 1 :] if after in ids else []
        page = models[:limit]
    elif before is not None:
        models = models[: ids.index(before)] if before in ids else []
        page = models[-limit:]
    else:
        page = models[:limit]
    return {
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(models) > len(page),
    }
