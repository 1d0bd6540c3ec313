"""Proxy logging: a request id on every line, secrets scrubbed, toolshim's debug output wired."""

from __future__ import annotations

import logging
import re
import secrets
import sys
import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TextIO

from toolshim.redact import redact

__all__ = [
    "LOG_LEVELS",
    "REQUEST_ID",
    "REQUEST_SECRETS",
    "RedactingFormatter",
    "RequestIdFilter",
    "configure_logging",
    "new_request_id",
    "redact",
]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

REQUEST_ID: ContextVar[str] = ContextVar("toolshim_request_id", default="-")
"""The id of the request being served in this task (``-`` outside requests)."""
REQUEST_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("toolshim_request_secrets", default=())
"""The credentials the request being served carries (its ``Authorization`` and API-key header
values, and the token after a scheme word): masked in every log line written while serving
it, whatever their form (``Token X``, a raw key)."""

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_FORMAT = "%(asctime)s %(levelname)-7s [%(request_id)s] %(name)s: %(message)s"


_CREDENTIAL_HEADERS = frozenset(
    {b"authorization", b"x-api-key", b"api-key", b"proxy-authorization"}
)


def request_secrets(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, ...]:
    """The credential values in raw request ``headers`` (see :data:`REQUEST_SECRETS`)."""
    out: list[str] = []
    for name, value in headers:
        if name in _CREDENTIAL_HEADERS and value:
            text = value.decode("latin-1").strip()
            out.append(text)
            token = text.rpartition(" ")[2]
            if token != text:
                out.append(token)
    return tuple(s for s in out if len(s) >= 4)


def new_request_id(offered: str | None = None) -> str:
    """The caller's ``x-request-id`` when it is a sane token, else a fresh ``req_…`` id."""
    if offered and _SAFE_ID.match(offered):
        return offered
    return f"req_{secrets.token_hex(6)}"


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` (the id of the request this task serves)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class RedactingFormatter(logging.Formatter):
    """A formatter whose output never contains a key: the last line of defence for logs."""

    def __init__(self, fmt: str = _FORMAT, *, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = tuple(s for s in secrets if s)
        self._second: int | None = None
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """The standard ``asctime``, with the date and time part rendered once a second."""
        if datefmt is not None or self.default_msec_format is None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        return self.default_msec_format % (self._stamp, record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        request_secrets = REQUEST_SECRETS.get()
        secrets = self.secrets + request_secrets if request_secrets else self.secrets
        return redact(self._line(record), secrets)

    def _line(self, record: logging.LogRecord) -> str:
        """:meth:`logging.Formatter.format`'s line; for toolshim's own format (the proxy's line
        per request) written directly, as ``_FORMAT % record.__dict__`` would write it."""
        if self._fmt != _FORMAT or record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        return "%s %-7s [%s] %s: %s" % (  # noqa: UP031 (the same % as the format's)
            record.asctime,
            record.levelname,
            record.request_id,  # type: ignore[attr-defined]
            record.name,
            record.message,
        )


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time of each record, not the one at set-up:
    a caller that swaps stderr (a test runner, an embedding app) and closes its stand-in later
    must not turn every later log line into a "Logging error" traceback."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def configure_logging(
    level: str = "info", *, secrets: Iterable[str] = (), stream: TextIO | None = None
) -> logging.Handler:
    """Send toolshim's logs (and the server's warnings) to ``stream`` (stderr) at ``level``.

    ``debug`` shows, per request, what was sent upstream and the model's raw text (logger
    ``toolshim.engine``), each line tagged with the request id. Third-party HTTP libraries stay
    at WARNING so that their chatter does not drown toolshim's own lines.
    """
    name = level.strip().lower()
    if name not in LOG_LEVELS:
        from toolshim.errors import ConfigError

        raise ConfigError(
            f"unknown log level {level!r}; choose one of: {', '.join(LOG_LEVELS)}",
            param="log_level",
        )
    numeric = getattr(logging, name.upper())
    # The proxy logs a line per request: skip what its format never shows (the logging
    # HOWTO's "Optimization" knobs), which halves the cost of each record.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None  # no caller lookup: the format has no %(lineno)s
    handler: logging.StreamHandler[TextIO] = (
        logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    )
    handler.setFormatter(RedactingFormatter(secrets=secrets))
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_toolshim", False)]:
        root.removeHandler(old)
    handler._toolshim = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    logging.getLogger("toolshim").setLevel(numeric)
    for noisy in ("httpx", "httpcore", "aiohttp", "asyncio", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("uvicorn.error").setLevel(max(numeric, logging.WARNING))
    return handler
