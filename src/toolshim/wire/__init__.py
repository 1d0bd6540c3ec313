"""Wire formats: one package per protocol the proxy speaks, each with its codec (see
:mod:`toolshim.wire.base`): ``openai_chat`` (Chat Completions, also how upstreams are spoken
to), ``openai_responses`` (the Responses API), ``anthropic`` (the Anthropic Messages API);
:mod:`.sse` writes server-sent events for all of them.
"""
