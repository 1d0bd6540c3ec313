"""Builders for the local-model tests: fake part distributions and wheels, the fake launcher."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from toolshim.local.model import KnownModel, ModelPart

FAKE_LAUNCHER = [sys.executable, str(Path(__file__).with_name("fake_launcher.py"))]


@dataclass
class FakeModel:
    model: KnownModel
    payload: bytes
    site: Path
    """A directory on sys.path that holds the parts as installed distributions."""


def part_payloads(sizes: list[int], seed: int = 7) -> list[bytes]:
    out = []
    for i, size in enumerate(sizes):
        block = hashlib.sha256(f"{seed}-{i}".encode()).digest()
        out.append((block * (size // len(block) + 1))[:size])
    return out


def fake_known_model(
    name: str, sizes: list[int], *, version: str = "1.0.0", sha256: str | None = None
) -> tuple[KnownModel, list[bytes]]:
    """A KnownModel of ``len(sizes)`` parts named ``toolshim-fake-<name>-partN``."""
    payloads = part_payloads(sizes)
    package = f"toolshim-fake-{name}-part"
    module = package.replace("-", "_")
    parts = tuple(
        ModelPart(f"{package}{i}", version, f"{module}{i}/data/part{i:02d}.bin", size)
        for i, size in enumerate(sizes, start=1)
    )
    model = KnownModel(
        name=name,
        filename=f"{name}.gguf",
        alias=f"{name}-alias",
        description=f"fake model {name}",
        size=sum(sizes),
        sha256=sha256 or hashlib.sha256(b"".join(payloads)).hexdigest(),
        parts=parts,
        extra=f"fake-{name}",
    )
    return model, payloads


def install_parts(
    site: Path, model: KnownModel, payloads: list[bytes], *, version: str | None = None
) -> None:
    """Write each part as an installed distribution (dist-info + data file) under ``site``."""
    for part, payload in zip(model.parts, payloads, strict=True):
        data = site / part.path
        data.parent.mkdir(parents=True, exist_ok=True)
        data.write_bytes(payload)
        dist_info = site / f"{part.package.replace('-', '_')}-{version or part.version}.dist-info"
        dist_info.mkdir(parents=True, exist_ok=True)
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {part.package}\nVersion: {version or part.version}\n"
        )


def build_wheels(directory: Path, model: KnownModel, payloads: list[bytes]) -> None:
    """Write each part as a downloaded wheel (a zip holding the data file) under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for part, payload in zip(model.parts, payloads, strict=True):
        with zipfile.ZipFile(directory / part.wheel_name, "w", zipfile.ZIP_STORED) as wheel:
            wheel.writestr(part.path, payload)
