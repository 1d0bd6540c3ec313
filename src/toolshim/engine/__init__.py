"""The engine: modes, strategies, emulation, validation and re-asks."""

from toolshim.engine.api import Answer
from toolshim.engine.engine import Engine
from toolshim.engine.options import EngineOptions
from toolshim.engine.turn import RESCUED_WARNING

__all__ = ["RESCUED_WARNING", "Answer", "Engine", "EngineOptions"]
