"""Access keys for the proxy itself (``--auth-keys FILE``): loading, and a constant-time check."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from toolshim.errors import ConfigError

__all__ = ["AccessKeys", "admin_names", "presented_key"]

_MIN_KEY_LENGTH = 16


@dataclass(frozen=True, slots=True)
class _Key:
    name: str
    digest: bytes


class AccessKeys:
    """The keys a caller may present, each with a name that logs and metrics show instead.

    The file has one key per line, optionally as ``name:key``; blank lines and lines starting
    with ``#`` are skipped. A key without a name is called ``key<N>`` (its line number). Keys
    are kept as SHA-256 digests and compared with :func:`hmac.compare_digest` against every
    key, so neither the time taken nor the process memory tells a key away.
    """

    def __init__(self, keys: Iterable[tuple[str, str]]) -> None:
        self._keys = tuple(_Key(name, _digest(key)) for name, key in keys)
        if not self._keys:
            raise ConfigError("the access-key list is empty", param="auth_keys")

    @classmethod
    def load(cls, path: str | Path) -> AccessKeys:
        """Read ``path``; a ConfigError names the file and line of anything wrong in it."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read the access-key file {str(path)!r}: {exc}", param="auth_keys"
            ) from None
        keys: list[tuple[str, str]] = []
        names: set[str] = set()
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, key = line.partition(":")
            if not sep:
                name, key = f"key{number}", line
            name, key = name.strip(), key.strip()
            if len(key) < _MIN_KEY_LENGTH or any(c.isspace() for c in key):
                raise ConfigError(
                    f"{str(path)!r} line {number}: a key must be at least {_MIN_KEY_LENGTH} "
                    "characters without spaces",
                    param="auth_keys",
                )
            if not name or name in names:
                raise ConfigError(
                    f"{str(path)!r} line {number}: key names must be unique and not empty "
                    f"({name!r})",
                    param="auth_keys",
                )
            names.add(name)
            keys.append((name, key))
        if not keys:
            raise ConfigError(f"the access-key file {str(path)!r} holds no key", param="auth_keys")
        return cls(keys)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self._keys)

    def check(self, presented: str | None) -> str | None:
        """The name of the key ``presented`` is, else None (every key is compared)."""
        if not presented:
            return None
        digest = _digest(presented)
        found = None
        for key in self._keys:
            if hmac.compare_digest(digest, key.digest):
                found = key.name
        return found


def admin_names(text: str, keys: AccessKeys | None) -> tuple[str, ...]:
    """The key names ``--admin-keys`` lists; ConfigError for a name not in the key file."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names and keys is None:
        raise ConfigError(
            "--admin-keys names keys from --auth-keys; pass --auth-keys too", param="admin_keys"
        )
    unknown = [n for n in names if keys is not None and n not in keys.names]
    if unknown:
        known = ", ".join(keys.names) if keys is not None else ""
        raise ConfigError(
            f"--admin-keys: no key named {unknown[0]!r} in --auth-keys ({known})",
            param="admin_keys",
        )
    return names


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The key a request presents: ``Authorization: Bearer K`` or ``x-api-key: K`` (what the
    anthropic SDK sends)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name == b"x-api-key" and value.strip():
            return value.decode("latin-1").strip()
    return None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()
