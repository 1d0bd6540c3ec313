"""Credentials kept out of text: one ``redact`` for responses, logs, errors and health output.

What is masked: each given secret (a configured key, an ``Authorization`` value sent
upstream, and the token after its scheme word), ``Bearer …`` tokens, provider-style keys
(``sk-…``, ``gsk-…``, ``xai-…``, ``hf_…``), ``api_key=…``/``authorization: …`` pairs, and the
``user:pass@`` part of URLs. Masks are ``***``; the text around them is kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["MASK", "credential_values", "redact", "redact_json", "url_without_credentials"]

MASK = "***"

_SECRET_PATTERNS = re.compile(
    r"(?i)(bearer\s+)[^\s'\",]+"  # Authorization: Bearer <token>
    r"|\b(?:sk|gsk|xai)-[A-Za-z0-9_\-]{8,}|\bhf_[A-Za-z0-9]{16,}"  # provider-style keys
    r"|((?:api[_-]?key|authorization|x-api-key)['\"]?\s*[:=]\s*['\"]?"
    r"(?:(?:bearer|token|basic|key)\s+)?)[^\s'\",}]+"
    r"|(\b[a-z][a-z0-9+.\-]*://)[^\s/@'\"]+@"  # user:pass@ in a URL
)
_SECRET_HINTS = ("bearer", "sk-", "xai-", "hf_", "key", "authorization", "@")
_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with ``secrets`` and anything that looks like a credential masked."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MASK)
    lowered = text.lower()
    if not any(hint in lowered for hint in _SECRET_HINTS):
        return text  # the common case, ten times cheaper than the pattern
    return _SECRET_PATTERNS.sub(_mask, text)


def redact_json(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A JSON value with :func:`redact` applied to every string in it (keys included)."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {redact(str(k), secrets): redact_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v, secrets) for v in value]
    return value


def url_without_credentials(url: str) -> str:
    """``url`` without its ``user:pass@`` part (the URL as given when it has none)."""
    if "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def credential_values(headers: Mapping[str, str] | None = None, url: str = "") -> tuple[str, ...]:
    """The secrets in request ``headers`` (``Authorization`` and API-key headers: the whole
    value and the token after its scheme word) and in ``url``'s ``user:pass@``."""
    out: list[str] = []
    for name, value in (headers or {}).items():
        if name.lower() in _CREDENTIAL_HEADERS and value:
            out.append(value)
            token = value.strip().rpartition(" ")[2]
            if token != value:
                out.append(token)
    if "@" in url:
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is not None:
            for part in (parts.password, parts.username):
                if part:  # as written in the URL, and as sent (percent-decoded)
                    out.extend((part, unquote(part)))
    return tuple(dict.fromkeys(s for s in out if len(s) >= 4))


def _mask(match: re.Match[str]) -> str:
    if match.group(3):
        return f"{match.group(3)}{MASK}@"
    prefix = match.group(1) or match.group(2)
    return f"{prefix}{MASK}" if prefix else MASK
