"""The socket ``toolshim serve`` listens on, and whether an address is loopback only (where
no access keys are needed)."""

from __future__ import annotations

import ipaddress
import socket

from rich.console import Console

from toolshim.cli._common import fail

__all__ = ["is_loopback", "listen"]


def listen(host: str, port: int, err: Console) -> socket.socket:
    """A listening socket on ``host``:``port`` (inheritable, for uvicorn); exit with a
    one-line error when the address cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        fail(
            err,
            f"cannot listen on {host}:{port}: {reason}",
            "pick another --port (or stop what is using it)" if exc.errno == 98 else None,
        )
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    """True when every address ``host`` stands for is a loopback one."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
