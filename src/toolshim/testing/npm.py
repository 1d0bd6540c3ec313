"""Command-line programs from the npm registry, installed once into a cache folder: the coding
agents the suite and the tests drive (Claude Code, Codex CLI) and the MCP servers the tests
start. ``TOOLSHIM_TEST_CACHE`` names the cache (default ``~/.cache/toolshim-tests``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from toolshim.errors import ConfigError

__all__ = ["npm_cache", "npm_executable"]


def npm_cache() -> Path:
    return Path(os.environ.get("TOOLSHIM_TEST_CACHE") or Path.home() / ".cache/toolshim-tests")


def npm_executable(package: str, version: str, binary: str) -> Path:
    """``binary`` of ``package@version``, installed with npm on first use into its own folder
    of the cache (through a staging folder renamed into place, so a stopped install leaves
    nothing half-done); ConfigError without npm or when the install fails."""
    folder = npm_cache() / f"{package.rsplit('/', 1)[-1]}-{version}"
    executable = folder / "node_modules" / ".bin" / binary
    if executable.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        raise ConfigError(f"npm is not installed; {package} comes from the npm registry")
    staging = folder.with_name(f"{folder.name}.{os.getpid()}.partial")
    staging.mkdir(parents=True, exist_ok=True)
    spec = f"{package}@{version}"
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), spec],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise ConfigError(f"npm install {spec} failed: {done.stderr.strip()[-1500:]}")
    if not executable.exists():
        staging.rename(folder)
    else:  # another process installed it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return executable
