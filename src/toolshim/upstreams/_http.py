"""What the HTTP adapters share: reading JSON answers and events, and HTTP error mapping.

Transport-free: each adapter feeds it the bytes its client library gives. An error answer is
kept (status, body, the upstream's own message) with every credential the request carried
masked, so that an upstream echoing the key never hands it to a caller.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from toolshim.errors import (
    ConfigError,
    UpstreamProtocolError,
    UpstreamStatusError,
    upstream_error_fields,
)
from toolshim.redact import redact, redact_json, url_without_credentials

__all__ = [
    "completion_as_chunks",
    "json_object",
    "reply_object",
    "status_error",
    "upstream_headers",
    "with_authorization",
]


_HTML = re.compile(r"\s*<(!doctype\s+html|html|head|body)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.{0,200}?)</title>", re.IGNORECASE | re.DOTALL)


def json_object(content: bytes | str, url: str, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """A JSON object from an upstream's answer, or an UpstreamProtocolError quoting the start
    (``secrets`` masked)."""
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raw = content.encode() if isinstance(content, str) else content
        snippet = redact(raw[:200].decode("utf-8", "replace"), secrets)
        raise UpstreamProtocolError(
            f"the upstream at {url} answered with something that is not JSON: {snippet!r}",
            url=url,
        ) from exc
    if not isinstance(obj, dict):
        raise UpstreamProtocolError(
            f"the upstream at {url} answered with a JSON {type(obj).__name__}, not an object",
            url=url,
        )
    return obj


def status_error(
    status: int,
    content: bytes,
    url: str,
    retry_after: str | None = None,
    secrets: Iterable[str] = (),
) -> UpstreamStatusError:
    """An HTTP error answer, with the upstream's status, body, own message and Retry-After;
    ``secrets`` (the credentials the request carried) and key-like strings are masked."""
    try:
        body: Any = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = content.decode("utf-8", "replace")
    secrets = tuple(secrets)
    body = redact_json(body, secrets)
    if isinstance(body, str) and _HTML.match(body):
        title = _TITLE.search(body)
        page = repr(" ".join(title.group(1).split())) if title else "no title"
        message = f"the upstream answered HTTP {status} with an HTML page ({page})"
        return UpstreamStatusError(
            message, status=status, body=body, url=url, retry_after=retry_after
        )
    fields = upstream_error_fields(body)
    message = fields.get("message") or f"the upstream answered HTTP {status}"
    return UpstreamStatusError(
        redact(str(message), secrets),
        status=status,
        body=body,
        url=url,
        upstream_type=fields.get("type"),
        upstream_code=fields.get("code"),
        upstream_param=fields.get("param"),
        retry_after=retry_after,
    )


def reply_object(data: bytes | str, url: str, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """A reply's JSON (a whole answer, or one SSE event); an ``{"error": …}`` object in its
    place (an event sent mid-stream, or a body some servers send with status 200) raises an
    UpstreamStatusError with the upstream's own message (masked), never passes as a reply."""
    obj = json_object(data, url, secrets)
    if "error" in obj and "choices" not in obj:
        obj = redact_json(obj, secrets)
        fields = upstream_error_fields(obj)
        status = obj["error"].get("code") if isinstance(obj["error"], Mapping) else None
        raise UpstreamStatusError(
            str(fields.get("message") or "the upstream sent an error event"),
            status=status if isinstance(status, int) and 400 <= status < 600 else 502,
            body=obj,
            url=url,
        )
    return obj


def completion_as_chunks(completion: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A whole ``chat.completion`` as stream chunks (for upstreams that ignore ``stream``)."""
    base = {
        "id": completion.get("id", "chatcmpl-upstream"),
        "object": "chat.completion.chunk",
        "created": completion.get("created", int(time.time())),
        "model": completion.get("model", ""),
    }
    chunks = []
    for choice in completion.get("choices") or []:
        message = dict(choice.get("message") or {})
        delta: dict[str, Any] = {"role": message.pop("role", "assistant")}
        if message.get("content") is not None:
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])
            ]
        # the provider's own fields (reasoning_content, reasoning_details, …) travel too
        delta.update(
            (key, value)
            for key, value in message.items()
            if key not in ("content", "tool_calls") and value is not None
        )
        out: dict[str, Any] = {
            "index": choice.get("index", 0),
            "delta": delta,
            "finish_reason": choice.get("finish_reason"),
        }
        if choice.get("logprobs") is not None:
            out["logprobs"] = choice["logprobs"]
        chunks.append({**base, "choices": [out]})
    if completion.get("usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def upstream_headers(
    base_url: str, api_key: str | None, headers: Mapping[str, str] | None
) -> tuple[str, dict[str, str], str | None]:
    """An adapter's request URL base (``user:pass@`` taken out), its own headers, and the
    ``Authorization`` value every request must carry whatever the caller sent (the URL's
    ``user:pass@`` as Basic credentials; None when the URL has none).

    HTTP clients refuse or silently override an ``Authorization`` header sent to a URL that
    holds credentials, so the URL's are sent as a header, in place of a caller's. A key given
    as well is a ConfigError: only one of them can be sent.
    """
    own = {"Accept": "application/json", **(headers or {})}
    shown = url_without_credentials(base_url)
    parts = urlsplit(base_url)
    basic = None
    if shown != base_url and (parts.username or parts.password):
        if api_key:
            raise ConfigError(
                f"the upstream URL {shown!r} holds a user and password and an API key is given "
                "as well: only one can be sent as the upstream's Authorization; give one"
            )
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        basic = f"Basic {base64.b64encode(pair.encode()).decode()}"
        own["Authorization"] = basic
    elif api_key:
        own["Authorization"] = f"Bearer {api_key}"
    return shown, own, basic


def with_authorization(headers: dict[str, str], authorization: str | None) -> dict[str, str]:
    """``headers`` with ``authorization`` as their only ``Authorization`` (when given)."""
    if authorization is None:
        return headers
    for name in [n for n in headers if n.lower() == "authorization"]:
        del headers[name]
    headers["Authorization"] = authorization
    return headers
