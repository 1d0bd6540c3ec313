"""Fixtures of the registry tests: one real server of each shared backend per session, and a
fresh store of each backend per test (``backend_url`` runs a test once per backend)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.registry.servers import PostgresServer, RedisServer, running


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with running("postgres") as server:
        assert isinstance(server, PostgresServer)
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with running("redis") as server:
        assert isinstance(server, RedisServer)
        yield server


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a new, empty store of each backend in turn."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/caps.sqlite3"
    server = request.getfixturevalue(f"{request.param}_server")
    return str(server.new_database())
