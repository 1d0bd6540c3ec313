"""What a small model knows and judges on its own, the measurements behind issue 34's no-tool
figures (docs/results.md, "No-tool questions: the model's own doubt").

``knowledge``: the agent suite's no-tool questions asked with no tools at all, plainly (no
system message, so the model's template puts its own) and with two system messages. What the
model answers here is the best any tool handling can reach: a question it answers wrong
without tools is failed whatever toolshim does.

``judge``: the model asked, in a request of its own, whether the tool it called does what the
user asked ("Can this tool do what the user asks? Answer yes or no.", and two other wordings),
read as P(yes) / (P(yes) + P(no)) at the first token. Its own calls come from a committed
BFCL report (``--report``, its ``--config``): the calls it made to questions no tool fits
(``irrelevance``, ``live_irrelevance``) against its right calls, and the agent suite's right
first calls (``--agent-report``). The AUC says how well P(yes) ranks a right call above a
wrong one (0.5: no better than chance).

Point ``--upstream`` at a running server whose model made the report's calls, e.g.
``toolshim serve --local-model qwen2.5-coder-1.5b --port 8415`` and
``--upstream http://127.0.0.1:8415/v1`` (a request without tools passes straight through).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

SYSTEMS = (
    None,
    "You are a helpful assistant.",
    "Answer the user's question briefly and correctly.",
)


def _post(upstream: str, body: Mapping[str, Any]) -> dict[str, Any]:
    reply = httpx.post(upstream.rstrip("/") + "/chat/completions", json=body, timeout=600)
    reply.raise_for_status()
    result: dict[str, Any] = reply.json()
    return result


def knowledge(upstream: str) -> None:
    from toolshim.evaluation.agent_tasks import load_agent_tasks

    # The suite's own no-tool questions, judged by the suite's own check of the answer.
    tasks = [t for t in load_agent_tasks(["no_tool"]) if t.style == "text"]
    for system in SYSTEMS:
        right = 0
        for task in tasks:
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": task.question})
            body = {"model": "m", "messages": messages, "temperature": 0, "max_tokens": 80}
            answer = _post(upstream, body)["choices"][0]["message"]["content"] or ""
            ok = task.correct(answer, called=False)
            right += ok
            print(
                f"{system or '(template default)'!s:.30} | {task.id:18} | {'ok ' if ok else 'BAD'} | {answer[:70]!r}"
            )
        print(f"== {right}/{len(tasks)} right with system {system!r}\n")


def _describe(tool: Mapping[str, Any]) -> str:
    properties = tool.get("parameters", {}).get("properties", {})
    shown = ", ".join(
        f"{k} ({v['description']})" if isinstance(v, dict) and v.get("description") else k
        for k, v in properties.items()
    )
    return f"{tool['name']}: {tool.get('description', '')}\nParameters: {shown}"


WORDINGS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "can-do": lambda i: (
        f"Tool: {_describe(i['tool'])}\n\nUser: {i['question']}\n\n"
        "Can this tool do what the user asks? Answer yes or no."
    ),
    "this-call": lambda i: (
        f"Tool: {_describe(i['tool'])}\n\nUser: {i['question']}\n\n"
        f"Proposed call: {i['call']['name']}({i['call']['arguments']})\n\n"
        "Does this call's result answer exactly what the user asked? Answer yes or no."
    ),
    "exactly": lambda i: (
        f"User: {i['question']}\n\nTool: {_describe(i['tool'])}\n\n"
        "Does the tool compute exactly the thing the user asks for (not something related)? "
        "Answer yes or no."
    ),
}


def _items(report: str, config: str, agent_report: str | None, limit: int) -> list[dict[str, Any]]:
    from toolshim.evaluation.agent_tasks import load_agent_tasks
    from toolshim.evaluation.agent_tools import TOOLS
    from toolshim.evaluation.bfcl import load_cases

    rows = [
        r
        for r in json.loads(Path(report).read_text())["cases"]
        if r["config"] == config and r["called"]
    ]
    cases = {c.id: c for c in load_cases(sorted({r["category"] for r in rows}), limit=None)}
    wrong: list[dict[str, Any]] = []
    right: list[dict[str, Any]] = []
    for row in rows:
        case = cases[row["case_id"]]
        negative = case.category in ("irrelevance", "live_irrelevance")
        if not negative and not row["valid"]:
            continue
        call = row["tool_calls"][0]["function"]
        tool = next(t for t in case.tools() if t["function"]["name"] == call["name"])
        question = [m["content"] for m in case.messages if m["role"] == "user"][-1]
        item = {"id": row["case_id"], "question": question, "tool": tool["function"], "call": call}
        (wrong if negative else right).append(item)
    if agent_report:
        tasks = {t.id: t for t in load_agent_tasks()}
        for row in json.loads(Path(agent_report).read_text())["tasks"]:
            if row["correct"] and row["tool_calls"] and row["style"] == "text":
                name, _, arguments = row["tool_calls"][0].partition("(")
                question = tasks[row["task_id"]].question
                call = {"name": name, "arguments": arguments[:-1]}
                spec = TOOLS[name].spec()["function"]
                right.insert(
                    0, {"id": row["task_id"], "question": question, "tool": spec, "call": call}
                )
    return wrong + right[:limit]


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else float("nan")


def judge(upstream: str, report: str, config: str, agent_report: str | None, limit: int) -> None:
    items = _items(report, config, agent_report, limit)
    scores: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in WORDINGS}
    for n, item in enumerate(items, 1):
        negative = item["id"].startswith(("irrelevance", "live_irrelevance"))
        for name, wording in WORDINGS.items():
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": wording(item)}],
                "temperature": 0,
                "max_tokens": 1,
                "logprobs": True,
                "top_logprobs": 10,
            }
            top = _post(upstream, body)["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            yes = sum(
                math.exp(t["logprob"]) for t in top if t["token"].strip().lower().startswith("yes")
            )
            no = sum(
                math.exp(t["logprob"]) for t in top if t["token"].strip().lower().startswith("no")
            )
            scores[name][negative].append(yes / (yes + no) if yes + no else 0.5)
        print(f"[{n}/{len(items)}] {item['id']}", file=sys.stderr, flush=True)
    for name, (right, wrong) in scores.items():
        pairs = [(r > w) + 0.5 * (r == w) for r in right for w in wrong]
        auc = sum(pairs) / len(pairs) if pairs else float("nan")
        print(
            f"{name:10} AUC {auc:.2f}  wrong calls (n={len(wrong)}) median {_median(wrong):.2f}"
            f"  right calls (n={len(right)}) median {_median(right):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["knowledge", "judge"])
    parser.add_argument("--upstream", required=True, help="base URL, e.g. http://127.0.0.1:8415/v1")
    parser.add_argument("--report", default="docs/bfcl-qwen2.5-coder-1.5b.json")
    parser.add_argument("--config", default="auto+served+doubt")
    parser.add_argument("--agent-report", default="docs/agent-qwen2.5-coder-1.5b-first-step.json")
    parser.add_argument("--right", type=int, default=52, help="right calls to judge (agent first)")
    args = parser.parse_args()
    if args.what == "knowledge":
        knowledge(args.upstream)
    else:
        judge(args.upstream, args.report, args.config, args.agent_report or None, args.right)


if __name__ == "__main__":
    main()
