"""The agent suite's tasks: a question, the tools offered, and a checkable final answer.

Kinds: ``one_call`` (one call, then the answer), ``two_independent`` (two calls that need
nothing from each other), ``two_dependent`` (the second call needs the first's result),
``tool_error`` (a tool refuses; the model reports it or recovers), ``no_tool`` (no offered
tool fits; the answer comes from the model). These are the original 70 tasks (35 questions,
each with plain-text and JSON results), kept as they were so their figures stay comparable.

Harder kinds (:data:`HARD_KINDS`), added after them: ``three_dependent`` (a chain of three
calls, each needing the one before), ``earlier_turn`` (a value the user gave in an earlier
turn of the conversation), ``error_mid_chain`` (the chain's second call fails; the answer
says so), ``lookalike`` (the question sounds like a tool's job and is not: no call), and
``multi_turn`` (several user turns, each answered before the next; the last answer is
judged). An answer is correct when every group of ``expect`` matches it (a group is a regular
expression, case-blind) and, for ``no_tool`` and ``lookalike``, no tool was called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from toolshim.evaluation.agent_tools import Style

__all__ = ["HARD_KINDS", "KINDS", "ORIGINAL_KINDS", "TASKS", "AgentTask", "load_agent_tasks"]

Kind = Literal[
    "one_call",
    "two_independent",
    "two_dependent",
    "tool_error",
    "no_tool",
    "three_dependent",
    "earlier_turn",
    "error_mid_chain",
    "lookalike",
    "multi_turn",
]
ORIGINAL_KINDS: tuple[Kind, ...] = (
    "one_call",
    "two_independent",
    "two_dependent",
    "tool_error",
    "no_tool",
)
HARD_KINDS: tuple[Kind, ...] = (
    "three_dependent",
    "earlier_turn",
    "error_mid_chain",
    "lookalike",
    "multi_turn",
)
KINDS: tuple[Kind, ...] = ORIGINAL_KINDS + HARD_KINDS
NO_CALL_KINDS = frozenset({"no_tool", "lookalike"})


@dataclass(frozen=True)
class AgentTask:
    id: str
    kind: Kind
    question: str
    tools: tuple[str, ...]
    expect: tuple[str, ...]
    """Regular expressions the final answer must all match (case-blind)."""
    style: Style = "text"
    needs: tuple[str, ...] = field(default=())
    """The tools a correct run calls (empty: none)."""
    history: tuple[tuple[str, str], ...] = ()
    """Earlier turns of the conversation, ``(role, text)``, before :attr:`question`."""
    followups: tuple[str, ...] = ()
    """User turns asked after each answer, in order; the last answer is judged."""

    def correct(self, answer: str, called: bool) -> bool:
        if self.kind in NO_CALL_KINDS and called:
            return False
        return all(re.search(p, answer, re.IGNORECASE) for p in self.expect)


_ERR = r"(not found|no (weather )?data|unknown|unsupported|couldn'?t|could not|unable|cancel|invalid|doesn'?t exist|does not exist|no contact|no user|error|sorry|not (available|supported))"

_BASE: list[tuple[str, Kind, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = [
    # id, kind, question, tools offered, expected patterns, tools needed
    (
        "weather-paris",
        "one_call",
        "What's the weather in Paris right now?",
        ("get_weather", "get_stock_price"),
        (r"\b18\b", r"sunny"),
        ("get_weather",),
    ),
    (
        "weather-oslo",
        "one_call",
        "Is it cold in Oslo today? Tell me the temperature.",
        ("get_weather", "flight_status"),
        (r"-\s?3\b|minus 3",),
        ("get_weather",),
    ),
    (
        "weather-tokyo",
        "one_call",
        "How is the weather in Tokyo?",
        ("get_weather",),
        (r"\b24\b", r"cloud"),
        ("get_weather",),
    ),
    (
        "stock-nvda",
        "one_call",
        "What is NVDA trading at?",
        ("get_stock_price", "get_weather"),
        (r"127\.4",),
        ("get_stock_price",),
    ),
    (
        "stock-msft",
        "one_call",
        "Give me the current Microsoft stock price (ticker MSFT).",
        ("get_stock_price", "convert_currency"),
        (r"412\.8",),
        ("get_stock_price",),
    ),
    (
        "order-1001",
        "one_call",
        "Where is my order 1001?",
        ("lookup_order", "get_contact"),
        (r"shipped",),
        ("lookup_order",),
    ),
    (
        "order-1003",
        "one_call",
        "Has order 1003 arrived yet?",
        ("lookup_order",),
        (r"deliver|has arrived|\byes\b",),
        ("lookup_order",),
    ),
    (
        "contact-eli",
        "one_call",
        "What is Eli's email address?",
        ("get_contact", "find_user"),
        (r"eli@example\.com",),
        ("get_contact",),
    ),
    (
        "population-peru",
        "one_call",
        "How many people live in Peru?",
        ("get_population", "get_capital"),
        (r"34\.4",),
        ("get_population",),
    ),
    (
        "flight-ba117",
        "one_call",
        "Is flight BA117 on time?",
        ("flight_status", "get_weather"),
        (r"delay", r"45"),
        ("flight_status",),
    ),
    (
        "convert-100usd",
        "one_call",
        "Convert 100 USD to EUR.",
        ("convert_currency", "get_stock_price"),
        (r"92\.59|92\.6\b",),
        ("convert_currency",),
    ),
    (
        "calc-mul",
        "one_call",
        "Use the calculator: what is 1234 * 5678?",
        ("calculate",),
        (r"7,?006,?652",),
        ("calculate",),
    ),
    (
        "two-weather",
        "two_independent",
        "What's the weather in London and in Cairo?",
        ("get_weather",),
        (r"\b12\b", r"\b35\b"),
        ("get_weather",),
    ),
    (
        "two-stocks",
        "two_independent",
        "What are the prices of AAPL and TSLA?",
        ("get_stock_price",),
        (r"191\.25", r"243\.1"),
        ("get_stock_price",),
    ),
    (
        "two-contacts",
        "two_independent",
        "Give me the phone numbers of Dana and Fay.",
        ("get_contact",),
        (r"0101", r"0142"),
        ("get_contact",),
    ),
    (
        "two-flights",
        "two_independent",
        "What's the status of flights AF006 and LH400?",
        ("flight_status",),
        (r"on time", r"cancel"),
        ("flight_status",),
    ),
    (
        "weather-and-stock",
        "two_independent",
        "Tell me the weather in Madrid and the price of AMZN.",
        ("get_weather", "get_stock_price"),
        (r"\b29\b", r"178\.5"),
        ("get_weather", "get_stock_price"),
    ),
    (
        "capital-weather-japan",
        "two_dependent",
        "What's the weather like in the capital of Japan? Look up the capital first.",
        ("get_capital", "get_weather"),
        (r"\b24\b",),
        ("get_capital", "get_weather"),
    ),
    (
        "capital-weather-norway",
        "two_dependent",
        "Find the capital of Norway, then tell me its current weather.",
        ("get_capital", "get_weather"),
        (r"-\s?3\b|minus 3",),
        ("get_capital", "get_weather"),
    ),
    (
        "user-orders-alice",
        "two_dependent",
        "Which order ids does the customer with username alice have? Find her user id first.",
        ("find_user", "list_orders"),
        (r"1001", r"1003"),
        ("find_user", "list_orders"),
    ),
    (
        "user-orders-bob",
        "two_dependent",
        "List the orders of user bob (look up his user id, then his orders).",
        ("find_user", "list_orders", "lookup_order"),
        (r"1002",),
        ("find_user", "list_orders"),
    ),
    (
        "stock-in-eur",
        "two_dependent",
        "What is the price of one AAPL share in EUR? Get the USD price, then convert it.",
        ("get_stock_price", "convert_currency"),
        (r"177\.08|177\.1\b",),
        ("get_stock_price", "convert_currency"),
    ),
    (
        "capital-weather-egypt",
        "two_dependent",
        "Get the capital of Egypt and then the weather there.",
        ("get_capital", "get_weather"),
        (r"\b35\b",),
        ("get_capital", "get_weather"),
    ),
    (
        "err-weather-atlantis",
        "tool_error",
        "What's the weather in Atlantis?",
        ("get_weather",),
        (_ERR,),
        ("get_weather",),
    ),
    (
        "err-stock-zzzz",
        "tool_error",
        "What is the stock price of ZZZZ?",
        ("get_stock_price",),
        (_ERR,),
        ("get_stock_price",),
    ),
    (
        "err-flight-xx999",
        "tool_error",
        "Check the status of flight XX999.",
        ("flight_status",),
        (_ERR,),
        ("flight_status",),
    ),
    (
        "err-contact-zed",
        "tool_error",
        "What's Zed's phone number?",
        ("get_contact",),
        (_ERR,),
        ("get_contact",),
    ),
    (
        "err-currency-btc",
        "tool_error",
        "Convert 50 USD to BTC.",
        ("convert_currency",),
        (_ERR,),
        ("convert_currency",),
    ),
    (
        "recover-order-hash",
        "tool_error",
        "What's the status of order #1002? (The order tool may need the id in another form.)",
        ("lookup_order",),
        (r"processing|" + _ERR,),
        ("lookup_order",),
    ),
    (
        "none-hamlet",
        "no_tool",
        "Who wrote the play Hamlet?",
        ("get_weather", "get_stock_price"),
        (r"shakespeare",),
        (),
    ),
    (
        "none-gold",
        "no_tool",
        "What is the chemical symbol for gold?",
        ("get_weather", "lookup_order"),
        (r"\bAu\b",),
        (),
    ),
    (
        "none-spider",
        "no_tool",
        "How many legs does a spider have?",
        ("get_stock_price", "flight_status"),
        (r"\b8\b|eight",),
        (),
    ),
    (
        "none-colours",
        "no_tool",
        "What colour do you get when you mix blue and yellow?",
        ("get_weather", "get_contact"),
        (r"green",),
        (),
    ),
    (
        "none-spanish",
        "no_tool",
        "How do you say 'thank you' in Spanish?",
        ("get_weather", "convert_currency"),
        (r"gracias",),
        (),
    ),
    (
        "none-planet",
        "no_tool",
        "Which planet is the largest in our solar system?",
        ("get_weather", "get_population"),
        (r"jupiter",),
        (),
    ),
]


_HARD: list[AgentTask] = [
    # id, kind, question, tools offered, expected patterns, style (set below), tools needed
    AgentTask(
        "chain3-alice-first-order",
        "three_dependent",
        "What is the status of alice's first order? Look up her user id, then her orders, "
        "then that order.",
        ("find_user", "list_orders", "lookup_order"),
        (r"shipped",),
        needs=("find_user", "list_orders", "lookup_order"),
    ),
    AgentTask(
        "chain3-bob-delivery",
        "three_dependent",
        "When is bob's order expected? Find his user id, list his orders, then look the order up.",
        ("find_user", "list_orders", "lookup_order", "get_weather"),
        (r"2026-12-03|december 3|3 december|dec(ember)?\.? 3",),
        needs=("find_user", "list_orders", "lookup_order"),
    ),
    AgentTask(
        "chain3-norway-fahrenheit",
        "three_dependent",
        "What is the temperature in Fahrenheit in the capital of Norway? Find the capital, get "
        "its weather, then convert the Celsius value with the calculator (F = C * 9 / 5 + 32).",
        ("get_capital", "get_weather", "calculate"),
        (r"26\.6",),
        needs=("get_capital", "get_weather", "calculate"),
    ),
    AgentTask(
        "earlier-username",
        "earlier_turn",
        "Which order ids do I have?",
        ("find_user", "list_orders", "get_weather"),
        (r"1004",),
        needs=("find_user", "list_orders"),
        history=(
            ("user", "Hi! My username is carol."),
            ("assistant", "Hello carol! How can I help you today?"),
        ),
    ),
    AgentTask(
        "earlier-destination",
        "earlier_turn",
        "What's the weather like where I'm going?",
        ("get_weather", "flight_status"),
        (r"\b24\b", r"cloud"),
        needs=("get_weather",),
        history=(
            ("user", "I'm flying to Tokyo tomorrow."),
            ("assistant", "Have a great trip to Tokyo!"),
        ),
    ),
    AgentTask(
        "earlier-ticker",
        "earlier_turn",
        "What is that stock trading at now?",
        ("get_stock_price", "convert_currency"),
        (r"127\.4",),
        needs=("get_stock_price",),
        history=(
            ("user", "I'm thinking about buying some NVDA."),
            ("assistant", "NVDA is NVIDIA's ticker symbol. What would you like to know?"),
        ),
    ),
    AgentTask(
        "midchain-kenya-weather",
        "error_mid_chain",
        "What's the weather in the capital of Kenya? Find the capital first.",
        ("get_capital", "get_weather"),
        (r"nairobi", _ERR),
        needs=("get_capital", "get_weather"),
    ),
    AgentTask(
        "midchain-erin-orders",
        "error_mid_chain",
        "Which orders does user erin have? Look up her user id, then her orders.",
        ("find_user", "list_orders"),
        (_ERR,),
        needs=("find_user", "list_orders"),
    ),
    AgentTask(
        "midchain-tsla-btc",
        "error_mid_chain",
        "What does one TSLA share cost in BTC? Get its USD price, then convert it.",
        ("get_stock_price", "convert_currency"),
        (_ERR,),
        needs=("get_stock_price", "convert_currency"),
    ),
    AgentTask(
        "lookalike-weather-word",
        "lookalike",
        "What does the word 'weather' mean? Explain it in one sentence.",
        ("get_weather",),
        (r"atmospher|condition|climate|rain|temperature",),
    ),
    AgentTask(
        "lookalike-km-miles",
        "lookalike",
        "Convert 10 kilometres to miles.",
        ("convert_currency", "get_weather"),
        (r"6\.2",),
    ),
    AgentTask(
        "lookalike-apple-founder",
        "lookalike",
        "Who founded Apple, the company behind the AAPL ticker?",
        ("get_stock_price",),
        (r"jobs|wozniak",),
    ),
    AgentTask(
        "turns-paris-then-oslo",
        "multi_turn",
        "What's the weather in Paris?",
        ("get_weather", "get_stock_price"),
        (r"-\s?3\b|minus 3", r"snow"),
        needs=("get_weather",),
        followups=("And in Oslo?",),
    ),
    AgentTask(
        "turns-aapl-then-eur",
        "multi_turn",
        "What is AAPL trading at?",
        ("get_stock_price", "convert_currency"),
        (r"177\.08|177\.1\b",),
        needs=("get_stock_price", "convert_currency"),
        followups=("Convert that price to EUR.",),
    ),
    AgentTask(
        "turns-alice-then-orders",
        "multi_turn",
        "What is the user id of alice?",
        ("find_user", "list_orders"),
        (r"1001", r"1003"),
        needs=("find_user", "list_orders"),
        followups=("Now list her orders.",),
    ),
]


def _expand() -> tuple[AgentTask, ...]:
    """Every base task with text and with JSON results, ordered so that any first few of a
    kind are different questions with both styles: b0-text, b1-json, b2-text, …, then
    b0-json, b1-text, … (a ``--limit`` run samples the kind evenly). The harder tasks follow
    the same way, after all the original ones."""
    tasks: list[AgentTask] = []
    for flip in (0, 1):
        for index, (id_, kind, question, tools, expect, needs) in enumerate(_BASE):
            style: Style = ("text", "json")[(index + flip) % 2]
            tasks.append(AgentTask(f"{id_}-{style}", kind, question, tools, expect, style, needs))
    for flip in (0, 1):
        for index, task in enumerate(_HARD):
            style = ("text", "json")[(index + flip) % 2]
            tasks.append(replace(task, id=f"{task.id}-{style}", style=style))
    return tuple(tasks)


TASKS: tuple[AgentTask, ...] = _expand()


def load_agent_tasks(kinds: list[str] | None = None, limit: int | None = None) -> list[AgentTask]:
    """The tasks of the given kinds (all by default), at most ``limit`` of each kind."""
    wanted = set(kinds or KINDS)
    unknown = wanted - set(KINDS)
    if unknown:
        from toolshim.errors import ConfigError

        raise ConfigError(
            f"unknown agent task kinds {sorted(unknown)}; known: {', '.join(KINDS)}",
            param="category",
        )
    out: list[AgentTask] = []
    counts: dict[str, int] = {}
    for task in TASKS:
        if task.kind not in wanted:
            continue
        if limit is not None and counts.get(task.kind, 0) >= limit:
            continue
        counts[task.kind] = counts.get(task.kind, 0) + 1
        out.append(task)
    return out
