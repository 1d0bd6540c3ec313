"""The proxy's protocol routes: each path served by one codec from ``toolshim.wire``.

A new protocol is one codec module (see :mod:`toolshim.wire.base`) and one line in
:data:`PROTOCOLS`. Each path is also served without its ``/v1`` prefix and with a trailing
slash; errors on a path under a protocol's route (an unknown sub-path, a wrong method) are
written in that protocol's error shape.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum

from toolshim.wire import anthropic, openai_chat, openai_responses
from toolshim.wire.base import Codec

__all__ = ["ANTHROPIC_CLIENT", "PROTOCOLS", "Kind", "ProtocolRoute", "codec_for_path"]

ANTHROPIC_CLIENT: ContextVar[bool] = ContextVar("toolshim_anthropic_client", default=False)
"""The request being served carries ``anthropic-version`` (an anthropic SDK or Claude Code):
a path outside the protocol routes answers it in Anthropic's shapes."""


class Kind(StrEnum):
    """What a protocol route does with a request."""

    SERVE = "serve"
    """Serve it on the engine (JSON or server-sent events)."""
    COUNT_TOKENS = "count_tokens"
    """Count its input tokens (Anthropic's ``/v1/messages/count_tokens``)."""


@dataclass(frozen=True, slots=True)
class ProtocolRoute:
    path: str
    codec: Codec
    kind: Kind = Kind.SERVE

    @property
    def paths(self) -> tuple[str, ...]:
        """The path, the same without ``/v1``, and both with a trailing slash."""
        short = self.path.removeprefix("/v1")
        return (self.path, f"{self.path}/", short, f"{short}/")


PROTOCOLS: tuple[ProtocolRoute, ...] = (
    ProtocolRoute("/v1/chat/completions", openai_chat.CODEC),
    ProtocolRoute("/v1/responses", openai_responses.CODEC),
    ProtocolRoute("/v1/messages", anthropic.CODEC),
    ProtocolRoute("/v1/messages/count_tokens", anthropic.CODEC, Kind.COUNT_TOKENS),
)


def codec_for_path(path: str) -> Codec:
    """The codec whose error shape a response on ``path`` uses: the protocol route's; else
    Anthropic's for an Anthropic client (its ``base_url`` ending in ``/v1`` posts to
    ``/v1/v1/messages``), else OpenAI's."""
    best: ProtocolRoute | None = None
    for route in PROTOCOLS:
        for prefix in route.paths[::2]:
            if (path == prefix or path.startswith(prefix + "/")) and (
                best is None or len(route.path) > len(best.path)
            ):
                best = route
    if best is not None:
        return best.codec
    return anthropic.CODEC if ANTHROPIC_CLIENT.get() else openai_chat.CODEC
