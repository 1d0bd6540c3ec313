"""The limits ``toolshim serve`` holds every request and connection to: their options (each a
flag and a ``TOOLSHIM_…`` variable), sizes such as ``16M``, the open-file limit they must fit,
and the :class:`~toolshim.server.limits.Limits` built from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from toolshim.errors import ConfigError

if TYPE_CHECKING:
    from toolshim.server.limits import Limits

__all__ = [
    "BodyTimeoutOption",
    "DrainTimeoutOption",
    "HeaderTimeoutOption",
    "IdleTimeoutOption",
    "MaxBodySizeOption",
    "MaxConcurrentRequestsOption",
    "MaxConnectionsOption",
    "MaxMessagesOption",
    "MaxToolsOption",
    "build_limits",
    "fit_connections",
    "parse_size",
]


def _option(envvar: str, text: str, **more: Any) -> Any:
    """An option named after its parameter, read from ``envvar`` too."""
    return typer.Option(envvar=envvar, help=text, **more)


MaxBodySizeOption = Annotated[
    str,
    _option(
        "TOOLSHIM_MAX_BODY_SIZE",
        "Largest request body (bytes, or with a K/M/G suffix); larger gets a 413.",
    ),
]
MaxToolsOption = Annotated[int, _option("TOOLSHIM_MAX_TOOLS", "Tools in one request.", min=1)]
MaxMessagesOption = Annotated[
    int, _option("TOOLSHIM_MAX_MESSAGES", "Messages in one request.", min=1)
]
MaxConcurrentRequestsOption = Annotated[
    int,
    _option(
        "TOOLSHIM_MAX_CONCURRENT_REQUESTS",
        "Requests served at once; more get a 429 with Retry-After (/healthz and /metrics are "
        "not counted).",
        min=1,
    ),
]
MaxConnectionsOption = Annotated[
    int,
    _option(
        "TOOLSHIM_MAX_CONNECTIONS",
        "Open client connections (lowered to fit the open-file limit). At the limit the "
        "connection that has waited longest for its headers is closed for a new one.",
        min=1,
    ),
]
HeaderTimeoutOption = Annotated[
    float,
    _option(
        "TOOLSHIM_HEADER_TIMEOUT",
        "Seconds a client has to send a request's headers (then 408, closed).",
        min=0.1,
    ),
]
BodyTimeoutOption = Annotated[
    float,
    _option(
        "TOOLSHIM_BODY_TIMEOUT",
        "Seconds a client has to send a request's body once its headers are in.",
        min=0.1,
    ),
]
IdleTimeoutOption = Annotated[
    float,
    _option(
        "TOOLSHIM_IDLE_TIMEOUT", "Seconds an idle keep-alive connection is kept open.", min=0.1
    ),
]
DrainTimeoutOption = Annotated[
    float,
    _option(
        "TOOLSHIM_DRAIN_TIMEOUT",
        "On shutdown (SIGTERM, Ctrl-C), seconds in-flight requests get to finish; those still "
        "running then get a 503 (a stream, an error event).",
        min=0,
    ),
]


def build_limits(
    err: Console,
    *,
    max_body_size: str,
    max_connections: int,
    store_max_size: str,
    store_key_quota: str,
    **given: Any,
) -> Limits:
    """The limits the flags give: the sizes read (:func:`parse_size`), the connections fit to
    the open-file limit (:func:`fit_connections`), the rest (``given``) as they are."""
    from toolshim.server.limits import Limits

    return Limits(
        max_body_bytes=parse_size(max_body_size, "--max-body-size"),
        max_connections=fit_connections(max_connections, err),
        store_max_bytes=parse_size(store_max_size, "--store-max-size"),
        store_key_quota=0
        if store_key_quota.strip() == "0"
        else parse_size(store_key_quota, "--store-key-quota"),
        **given,
    )


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str, flag: str) -> int:
    """``16M``, ``512K``, ``1G``, ``1048576`` (also ``16MiB``, ``16MB``: binary units) in bytes."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in ("K", "M", "G") else ""
    try:
        number = float(value[: len(value) - len(unit)])
    except ValueError:
        number = -1
    if number <= 0:
        raise ConfigError(f"{flag} must be a size such as 16M or 1048576, not {text!r}")
    return int(number * _SIZE_UNITS[unit])


_FDS_RESERVED = 64
"""Open files kept for the process itself (the registry, logs, the embedded model)."""


def fit_connections(wanted: int, err: Console) -> int:
    """``wanted`` client connections, fewer when the open-file limit cannot hold them (each
    in-flight request also holds an upstream connection); the soft limit is raised to the
    hard one first, as servers do."""
    try:
        import resource
    except ImportError:  # Windows
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted * 2 + _FDS_RESERVED
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    fitting = max(1, (soft - _FDS_RESERVED) // 2)
    if fitting < wanted:
        err.print(
            f"[yellow]warning:[/] the open-file limit ({soft}) holds {fitting} client "
            f"connections, not {wanted}; --max-connections is {fitting} (raise `ulimit -n`)"
        )
        return fitting
    return wanted
