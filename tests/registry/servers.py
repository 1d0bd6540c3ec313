"""Real PostgreSQL and Redis servers for the tests, started on 127.0.0.1 in temporary directories.

Debian's packages (``postgresql``, ``redis-server``) provide the binaries; ``.ci/run`` installs
them. Where they are missing the tests that need them are skipped with the reason, except under
CI (``CI`` set), where a missing server is a failure: none of these tests may be skipped there.
PostgreSQL refuses to run as root, so as root its processes run as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolshim.testing import free_port

__all__ = ["PostgresServer", "RedisServer", "need"]

REDIS_PASSWORD = "s3cret-redis"
"""Every test Redis requires this password, so credentials travel in every URL under test."""


def need(binary: str | None, what: str) -> str:
    """``binary`` if found; else skip the test locally, fail it under CI."""
    if binary:
        return binary
    message = f"{what} is not installed (apt-get install -y postgresql redis-server)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must run the PostgreSQL and Redis tests")
    pytest.skip(message)


def _wait_for_port(port: int, deadline: float, process: subprocess.Popen[bytes] | None) -> None:
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class PostgresServer:
    """A PostgreSQL cluster in a temporary directory (trust authentication on 127.0.0.1)."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        initdb = need(found[-1] if found else shutil.which("initdb"), "PostgreSQL")
        self.bin = Path(initdb).parent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="toolshim-pg-"))
        self._user = "postgres" if os.geteuid() == 0 else None
        if self._user:
            entry = pwd.getpwnam(self._user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.dir / "data"),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self.start()

    def _run(self, *argv: str) -> None:
        command = ["runuser", "-u", self._user, "--", *argv] if self._user else list(argv)
        subprocess.run(command, check=True, capture_output=True, cwd=self.dir, timeout=120)

    @property
    def url(self) -> str:
        return f"postgresql://postgres:pg-s3cret@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.dir} -F -c max_connections=200"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.dir / "data"),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "stop")

    def new_database(self) -> str:
        """The URL of a new empty database on this server."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url.rsplit("/", 1)[0] + "/" + name

    def close(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop"
            )
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer:
    """A redis-server in a temporary directory, with a password and an append-only file (so
    a restart keeps what was written, as a production Redis holding a registry should)."""

    def __init__(self) -> None:
        self.binary = need(shutil.which("redis-server"), "redis-server")
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="toolshim-redis-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://:{REDIS_PASSWORD}@127.0.0.1:{self.port}/0"

    def new_database(self) -> str:
        """A URL whose keys no other test shares (a prefix of its own)."""
        return f"{self.url}?prefix=t{uuid.uuid4().hex[:12]}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--requirepass",
                REDIS_PASSWORD,
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, time.monotonic() + 30, self.process)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(30)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def running(kind: str) -> Iterator[PostgresServer | RedisServer]:
    server: PostgresServer | RedisServer = PostgresServer() if kind == "postgres" else RedisServer()
    try:
        yield server
    finally:
        server.close()
