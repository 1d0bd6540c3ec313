"""toolshim's optional dependencies: one imported on demand, or a ConfigError that names the
extra which installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from toolshim.errors import ConfigError

__all__ = ["require"]


def require(module: str, extra: str, needed: str, *, param: str) -> ModuleType:
    """``module`` imported; when it is missing, ConfigError ``{needed}: pip install
    'toolshim[{extra}]'`` about ``param``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{needed}: pip install 'toolshim[{extra}]'", param=param) from exc
