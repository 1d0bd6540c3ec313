"""An ASGI app (the proxy, usually) served by a real uvicorn on 127.0.0.1, on a free port.

``with ServedApp(app) as served:`` runs it from a background thread (its own event loop);
``async with ServedApp(app) as served:`` runs it as a task on the running loop. Either way the
block starts once uvicorn listens (at most ``start_timeout`` seconds) and ends after it has
stopped; ``served.url`` is its root, ``served.base_url`` the ``/v1`` below it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

__all__ = ["ServedApp"]


class ServedApp:
    """uvicorn serving ``app`` (see the module docstring). ``quiet`` leaves logging alone and
    logs no access lines; other keywords are ``uvicorn.Config``'s."""

    def __init__(
        self, app: Any, *, quiet: bool = True, start_timeout: float = 30.0, **options: Any
    ) -> None:
        import uvicorn

        if quiet:
            options = {"log_config": None, "access_log": False, **options}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, **{"lifespan": "on", **options}))
        self._start_timeout = start_timeout
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def __enter__(self) -> ServedApp:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.__exit__()
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._sock.close()

    async def __aenter__(self) -> ServedApp:
        self._task = asyncio.create_task(self.server.serve(sockets=[self._sock]))
        deadline = time.monotonic() + self._start_timeout
        while not self.server.started:
            if self._task.done():
                self._task.result()
            if time.monotonic() > deadline:
                await self.__aexit__()
                raise RuntimeError("uvicorn did not start")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        if self._task is not None:
            await self._task
        self._sock.close()
