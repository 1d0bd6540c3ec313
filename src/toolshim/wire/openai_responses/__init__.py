"""The OpenAI Responses protocol (``POST /v1/responses``).

:mod:`.codec`   the proxy's codec, with the stored documents behind ``previous_response_id``
:mod:`.input`   requests and their input items read into core types
:mod:`.tools`   tools and ``tool_choice`` read into core types
:mod:`.events`  completions and stream chunks written as a response object and its events
"""

from toolshim.wire.openai_responses.codec import CODEC, ResponsesCodec, ResponsesRequest

__all__ = ["CODEC", "ResponsesCodec", "ResponsesRequest"]
