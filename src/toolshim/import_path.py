"""Loading what a ``module:function`` import path names: the one importer behind the chat's
``--tools`` and an agent file's ``tools``. Callers put their own prefix before its messages
("--tools 'x:y': …", "phase 1: tool 'x:y': …") and judge what they got (a function or not)."""

from __future__ import annotations

import importlib
from typing import Any

from toolshim.errors import ConfigError

__all__ = ["import_attribute", "split_import_path"]


def split_import_path(path: str) -> tuple[str, str] | None:
    """``(module, attribute)`` of ``module:attribute``, as written; None when either is missing."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name.strip() or not attribute.strip():
        return None
    return module_name, attribute


def import_attribute(module_name: str, attribute: str, *, looked_up: str) -> Any:
    """``module_name`` imported and ``attribute`` (dotted: ``Class.method``) looked up in it.

    A module that cannot be found, one that raises while importing, or a missing attribute is a
    :class:`ConfigError` quoting both names (and, for a missing one, the module's public
    callables); ``looked_up`` says where modules are searched ("sys.path and in the current
    directory")."""
    try:
        target: Any = importlib.import_module(module_name.strip())
    except ImportError as exc:
        raise ConfigError(
            f"cannot import module {module_name!r} ({exc}); it is looked up on {looked_up}"
        ) from exc
    except Exception as exc:  # the module failed while importing: report it in one line
        raise ConfigError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    module = target
    for part in attribute.strip().split("."):
        if not hasattr(target, part):
            available = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            raise ConfigError(
                f"module {module_name!r} has no {attribute!r}; its functions are: "
                f"{', '.join(available) or '(none)'}"
            )
        target = getattr(target, part)
    return target
