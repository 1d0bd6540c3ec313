"""The Anthropic Messages protocol (``POST /v1/messages``, ``/v1/messages/count_tokens``).

:mod:`.codec`     the proxy's codec: answers, stream events and errors in Anthropic's shapes
:mod:`.requests`  requests read into core types
"""

from toolshim.wire.anthropic.codec import CODEC, MessagesCodec, MessagesStreamEncoder

__all__ = ["CODEC", "MessagesCodec", "MessagesStreamEncoder"]
