"""The one redaction helper: configured secrets, credential headers, key shapes, URL user info."""

from __future__ import annotations

import pytest

from toolshim.redact import credential_values, redact, redact_json, url_without_credentials


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("key was TopSecret99 ok", ["TopSecret99"], "key was *** ok"),
        ("Authorization: Token abc123xyz", [], "Authorization: Token ***"),
        ("Bearer sk-abcdefghijkl", [], "Bearer ***"),
        ("see http://alice:pw1234@host:1/v1 now", [], "see http://***@host:1/v1 now"),
        ("mail bob@example.com stays", [], "mail bob@example.com stays"),
        ("http://host/v1?x=a@b stays", [], "http://host/v1?x=a@b stays"),
        ("nothing here", ["abc"], "nothing here"),
    ],
)
def test_redact(text: str, secrets: list[str], expected: str) -> None:
    assert redact(text, secrets) == expected


def test_the_longest_secret_is_masked_first() -> None:
    secrets = credential_values({"Authorization": "Bearer abcd1234"})
    assert secrets == ("Bearer abcd1234", "abcd1234")
    assert redact("got 'Bearer abcd1234' and abcd1234", secrets) == "got '***' and ***"


def test_credentials_in_headers_and_url() -> None:
    headers = {"X-Api-Key": "k-9876543", "Accept": "application/json"}
    assert credential_values(headers, "http://alice:pw1234@h/v1") == (
        "k-9876543",
        "pw1234",
        "alice",
    )


def test_redact_json_walks_every_string() -> None:
    body = {"error": {"message": "bad key k-9876543", "got": ["k-9876543", 1, None]}}
    assert redact_json(body, ["k-9876543"]) == {
        "error": {"message": "bad key ***", "got": ["***", 1, None]}
    }


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://alice:pw@h:8080/v1", "http://h:8080/v1"),
        ("http://alice@h/v1", "http://h/v1"),
        ("http://h:8080/v1", "http://h:8080/v1"),
    ],
)
def test_url_without_credentials(url: str, expected: str) -> None:
    assert url_without_credentials(url) == expected
