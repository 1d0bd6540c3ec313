"""``toolshim serve``'s options that bound what one caller among many may ask for and keep."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = [
    "AdminKeysOption",
    "MaxChoicesOption",
    "MaxOutputTokensOption",
    "StoreKeyQuotaOption",
    "StoreMaxSizeOption",
]

AdminKeysOption = Annotated[
    str,
    typer.Option(
        "--admin-keys",
        envvar="TOOLSHIM_ADMIN_KEYS",
        help="Names of keys from --auth-keys (comma-separated) whose holders see the "
        "per-key series on /metrics; other keys see the rest.",
        show_default=False,
    ),
]
MaxChoicesOption = Annotated[
    int,
    typer.Option(
        envvar="TOOLSHIM_MAX_CHOICES",
        help="The most answers (n) one request may ask for; more get a 400.",
        min=1,
    ),
]
MaxOutputTokensOption = Annotated[
    int,
    typer.Option(
        envvar="TOOLSHIM_MAX_OUTPUT_TOKENS",
        help="The most max_tokens a request may ask for; more is lowered to it, with a "
        "warning (0: no cap).",
        min=0,
    ),
]
StoreMaxSizeOption = Annotated[
    str,
    typer.Option(
        envvar="TOOLSHIM_STORE_MAX_SIZE",
        help="Stored Responses API answers (previous_response_id) kept in all (bytes, or "
        "with a K/M/G suffix); beyond it the oldest of the key holding the most go first.",
    ),
]
StoreKeyQuotaOption = Annotated[
    str,
    typer.Option(
        envvar="TOOLSHIM_STORE_KEY_QUOTA",
        help="Stored answers one access key keeps (bytes, K/M/G); beyond it that key's "
        "oldest go first. 0: only --store-max-size bounds a key.",
    ),
]
