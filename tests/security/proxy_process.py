"""A proxy in its own process, for tests whose old failure froze the process serving it.

``python -m tests.security.proxy_process MODE ARGUMENTS_JSON`` serves the proxy (uvicorn on
127.0.0.1, a free port) in front of :func:`calling_upstream` and prints ``port <n>``.
"""

from __future__ import annotations

import json
import socket
import sys

import uvicorn

from tests.security.helpers import calling_upstream
from toolshim.capabilities.registry import Registry
from toolshim.engine import Engine
from toolshim.server import create_app


def main() -> None:
    mode, arguments = sys.argv[1], json.loads(sys.argv[2])
    engine = Engine(calling_upstream(arguments), mode=mode, registry=Registry())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(create_app(engine), log_config=None, access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
