"""The change listener a shared store (PostgreSQL, Redis) runs: a thread that subscribes on a
connection of its own and passes every change on, reconnecting after an error (0.25 s, then
twice as long each time, at most 5 s)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable

from toolshim.capabilities.store import Changed

__all__ = ["ListeningWatch", "Receive"]

log = logging.getLogger("toolshim.capabilities")

Receive = Callable[[float], Iterable[str]]
"""The payloads that arrive within a timeout (seconds) on a subscribed connection."""


class ListeningWatch:
    """Calls ``changed`` for each message (a JSON ``[upstream, model]``; anything unreadable
    means "re-read everything") and ``changed(None, None)`` each time it (re)subscribes:
    whatever happened while it was not listening must be re-read. A subclass says how to
    subscribe (:meth:`_subscribed`); ``errors`` are the ones that mean "reconnect", logged with
    ``scrub`` (which keeps credentials out)."""

    def __init__(
        self,
        location: str,
        changed: Changed,
        errors: type[BaseException] | tuple[type[BaseException], ...],
        scrub: Callable[[BaseException], str],
    ) -> None:
        self._changed = changed
        self._errors = errors
        self._scrub = scrub
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._listen, name=f"toolshim-listen {location}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _subscribed(self) -> contextlib.AbstractContextManager[Receive]:
        """A subscription on a connection of its own, closed when the block ends."""
        raise NotImplementedError

    def _listen(self) -> None:
        pause = 0.25
        while not self._stop.is_set():
            try:
                with self._subscribed() as receive:
                    self._changed(None, None)
                    pause = 0.25
                    while not self._stop.is_set():
                        for payload in receive(0.5):
                            self._deliver(payload)
            except self._errors as exc:
                log.debug("listening for capability changes: %s", self._scrub(exc))
            self._stop.wait(pause)
            pause = min(pause * 2, 5.0)

    def _deliver(self, payload: str) -> None:
        try:
            upstream, model = json.loads(payload)
        except (ValueError, TypeError):
            upstream = model = None
        self._changed(upstream, model)
