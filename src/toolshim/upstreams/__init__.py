"""Upstreams: the model servers toolshim talks to."""

from toolshim.upstreams.base import Upstream
from toolshim.upstreams.openai_http import DEFAULT_TIMEOUT, OpenAIUpstream, normalize_base_url

__all__ = ["DEFAULT_TIMEOUT", "OpenAIUpstream", "Upstream", "normalize_base_url"]
