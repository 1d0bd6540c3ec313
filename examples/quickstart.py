"""Ten lines of toolshim: real tool calls from a model that has no tool support.

python examples/quickstart.py http://127.0.0.1:8080/v1    # e.g. `toolshim serve` (embedded model)
python examples/quickstart.py http://127.0.0.1:11434/v1 gemma3:1b   # Ollama, no native tools
"""

import sys

from toolshim import Engine

# fmt: off

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Current time in an IANA time zone", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}

engine = Engine(sys.argv[1], mode="auto", registry=":memory:")  # auto: native where supported
for question in ["What's the weather in Paris?", "Who wrote Hamlet?"]:
    request = {"model": sys.argv[2] if len(sys.argv) > 2 else "default", "temperature": 0, "tools": [WEATHER, TIME], "messages": [{"role": "user", "content": question}]}
    reply = engine.complete(request)
    answer = [(c.name, c.arguments) for c in reply.tool_calls] or reply.text
    print(f"{question} -> {answer}  [{', '.join(reply.meta.warnings) or 'native'}; re-asks {reply.meta.reasks}]")
engine.close()
# fmt: on
