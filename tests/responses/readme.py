"""The README's code blocks under a heading, so that tests run the exact config it shows."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_blocks(heading: str, language: str) -> list[str]:
    """The ``language`` code blocks of the README section ``## heading`` (up to the next ``##``)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)
