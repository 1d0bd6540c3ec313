"""toolshim: tool calling for every LLM — native where it works, emulated where it doesn't."""

from toolshim.agent import Agent, tool
from toolshim.capabilities import CapabilityStore, Fact, Registry, Source, Support
from toolshim.dialects import Dialect, available_dialects, get_dialect
from toolshim.engine import Engine, EngineOptions
from toolshim.errors import (
    ConfigError,
    InvalidRequestError,
    StoreError,
    ToolCallError,
    ToolshimError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from toolshim.types import (
    ChatRequest,
    Completion,
    Message,
    Metadata,
    Mode,
    Strategy,
    StreamChunk,
    ToolCall,
    ToolChoice,
    ToolSpec,
    Usage,
)
from toolshim.upstreams import OpenAIUpstream, Upstream
from toolshim.wire.openai_chat import completion_to_dict, read_request

__version__ = "0.1.0"

# The engine speaks core types; a request handed to it as a mapping is read as an OpenAI
# chat-completions body (the engine itself imports no protocol).
Engine.read_request = read_request

__all__ = [
    "Agent",
    "CapabilityStore",
    "ChatRequest",
    "Completion",
    "ConfigError",
    "Dialect",
    "Engine",
    "EngineOptions",
    "Fact",
    "InvalidRequestError",
    "Message",
    "Metadata",
    "Mode",
    "OpenAIUpstream",
    "Registry",
    "Source",
    "StoreError",
    "Strategy",
    "StreamChunk",
    "Support",
    "ToolCall",
    "ToolCallError",
    "ToolChoice",
    "ToolSpec",
    "ToolshimError",
    "Upstream",
    "UpstreamConnectionError",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "Usage",
    "__version__",
    "available_dialects",
    "completion_to_dict",
    "get_dialect",
    "tool",
]
