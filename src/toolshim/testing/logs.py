"""toolshim's logs captured in a test: the handler ``toolshim serve`` installs, writing into a
buffer, and the logging set-up as it was afterwards."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterable, Iterator

from toolshim.server.logs import configure_logging

__all__ = ["captured_logs"]


@contextlib.contextmanager
def captured_logs(level: str = "debug", *, secrets: Iterable[str] = ()) -> Iterator[io.StringIO]:
    """:func:`~toolshim.server.logs.configure_logging` at ``level`` into a buffer (yielded);
    the root logger's level and handlers and the ``toolshim`` logger's level restored after."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("toolshim").level)
    stream = io.StringIO()
    configure_logging(level, secrets=secrets, stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            if handler not in saved[1]:
                root.removeHandler(handler)
        root.setLevel(saved[0])
        logging.getLogger("toolshim").setLevel(saved[2])
