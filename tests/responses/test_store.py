"""The response store behind previous_response_id: a real SQLite file, bounded, surviving a reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolshim.capabilities.registry import Registry
from toolshim.errors import InvalidRequestError
from toolshim.responses_store import (
    MemoryDocuments,
    ResponseStore,
    SQLiteDocuments,
    open_response_store,
)

USER = {"type": "message", "role": "user", "content": "hi"}


def response(n: int) -> dict[str, object]:
    text = {"type": "output_text", "text": f"answer {n}", "annotations": []}
    return {
        "id": f"resp_{n}",
        "output": [{"type": "message", "role": "assistant", "content": [text]}],
    }


def test_a_stored_response_survives_a_reopen_and_continues_with_its_output(
    tmp_path: Path,
) -> None:
    path = tmp_path / "responses.sqlite3"
    first = SQLiteDocuments(path)
    ResponseStore(first).save(response(1), [USER])
    first.close()
    reopened = SQLiteDocuments(path)
    items = ResponseStore(reopened).conversation("resp_1")
    reopened.close()
    assert items[0] == USER and items[1]["content"][0]["text"] == "answer 1"


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_the_oldest_responses_are_evicted_beyond_the_limit(tmp_path: Path, kind: str) -> None:
    documents = (
        SQLiteDocuments(tmp_path / "r.sqlite3", limit=3) if kind == "sqlite" else MemoryDocuments(3)
    )
    store = ResponseStore(documents)
    for n in range(5):
        store.save(response(n), [USER])
    assert [store.get(f"resp_{n}") is not None for n in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    with pytest.raises(InvalidRequestError) as caught:
        store.conversation("resp_0")
    assert caught.value.status == 400 and caught.value.param == "previous_response_id"
    assert "'resp_0'" in caught.value.message


def test_an_expired_response_is_gone(tmp_path: Path) -> None:
    store = ResponseStore(SQLiteDocuments(tmp_path / "r.sqlite3"), ttl=-1.0)
    store.save(response(1), [USER])
    assert store.get("resp_1") is None


def test_the_store_sits_beside_the_registry_file_or_in_memory(tmp_path: Path) -> None:
    on_disk = open_response_store(Registry.open(tmp_path / "capabilities.sqlite3"))
    assert isinstance(on_disk.documents, SQLiteDocuments)
    assert on_disk.documents.path == str(tmp_path / "responses.sqlite3")
    assert isinstance(open_response_store(Registry()).documents, MemoryDocuments)
