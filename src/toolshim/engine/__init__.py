"""The engine: modes, strategies, emulation, validation and re-asks."""

from toolshim.engine.api import Answer
from toolshim.engine.engine import Engine
from toolshim.engine.options import EngineOptions

__all__ = ["Answer", "Engine", "EngineOptions"]
