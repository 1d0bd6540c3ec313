"""Wire formats: one codec per protocol the proxy speaks (see :mod:`toolshim.wire.base`).

``openai_chat`` (Chat Completions, also how upstreams are spoken to), ``anthropic_messages``
(the Anthropic Messages API); ``legacy``, ``requests``, ``responses`` and ``messages`` are the
chat-completions readers and writers ``openai_chat`` builds on.
"""
