"""The OpenAI-compatible proxy: ``create_app(engine)`` builds the ASGI app ``toolshim serve`` runs."""

from toolshim.server.app import ROUTES, ProxyApp, create_app
from toolshim.server.endpoint import ServerSettings
from toolshim.server.logs import configure_logging
from toolshim.server.metrics import Metrics

__all__ = ["ROUTES", "Metrics", "ProxyApp", "ServerSettings", "configure_logging", "create_app"]
