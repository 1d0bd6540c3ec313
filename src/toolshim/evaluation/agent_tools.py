"""The agent suite's tools: deterministic Python functions over a small fixed world, with schemas.

Every tool answers from fixed tables (no clock, no network), so a task's correct final answer
is known in advance. A tool returns plain text or JSON text (``style``), and signals a bad
argument by raising :class:`ToolFailure`, whose message goes back to the model as the result.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["TOOLS", "AgentTool", "ToolFailure", "run_tool"]

Style = Literal["text", "json"]


class ToolFailure(Exception):
    """A tool refused its arguments; the message is what the model sees."""


@dataclass(frozen=True)
class AgentTool:
    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[..., Any]
    """Returns a value rendered by :func:`run_tool`: a dict (JSON style) and a sentence."""

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def _params(required: list[str], **props: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(props), "required": required}


_STR = {"type": "string"}

WEATHER = {
    "paris": (18, "sunny"),
    "london": (12, "rainy"),
    "tokyo": (24, "cloudy"),
    "oslo": (-3, "snowing"),
    "cairo": (35, "sunny"),
    "sydney": (21, "windy"),
    "madrid": (29, "clear"),
    "berlin": (9, "foggy"),
    "rome": (26, "sunny"),
    "ottawa": (-8, "snowing"),
    "canberra": (15, "cloudy"),
    "lima": (19, "overcast"),
}
CAPITALS = {
    "france": "Paris",
    "japan": "Tokyo",
    "norway": "Oslo",
    "egypt": "Cairo",
    "spain": "Madrid",
    "germany": "Berlin",
    "italy": "Rome",
    "canada": "Ottawa",
    "australia": "Canberra",
    "peru": "Lima",
    "united kingdom": "London",
    "kenya": "Nairobi",  # no weather data: an error in the middle of a chain
}
STOCKS = {"AAPL": 191.25, "MSFT": 412.8, "NVDA": 127.4, "TSLA": 243.1, "AMZN": 178.5}
RATES_TO_USD = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.12}
ORDERS = {
    "1001": ("shipped", "2026-11-28"),
    "1002": ("processing", "2026-12-03"),
    "1003": ("delivered", "2026-11-20"),
    "1004": ("cancelled", None),
}
USERS = {"alice": "u-17", "bob": "u-42", "carol": "u-08", "erin": "u-99"}
USER_ORDERS = {"u-17": ["1001", "1003"], "u-42": ["1002"], "u-08": ["1004"]}
CONTACTS = {
    "dana": ("dana@example.com", "+1-555-0101"),
    "eli": ("eli@example.com", "+1-555-0199"),
    "fay": ("fay@example.com", "+1-555-0142"),
}
POPULATION_M = {"france": 68.2, "japan": 124.5, "norway": 5.5, "egypt": 112.7, "peru": 34.4}
FLIGHTS = {
    "BA117": "delayed by 45 minutes",
    "AF006": "on time",
    "LH400": "cancelled",
    "JL5": "boarding at gate 12",
}


def _city(city: str) -> str:
    key = city.strip().lower().split(",")[0].strip()
    if key not in WEATHER:
        raise ToolFailure(f"error: no weather data for city {city!r}")
    return key


def get_weather(city: str) -> tuple[dict[str, Any], str]:
    key = _city(city)
    temp, sky = WEATHER[key]
    name = key.title()
    return {"city": name, "temperature_c": temp, "conditions": sky}, f"{temp}°C and {sky} in {name}"


def get_capital(country: str) -> tuple[dict[str, Any], str]:
    key = country.strip().lower()
    if key not in CAPITALS:
        raise ToolFailure(f"error: unknown country {country!r}")
    capital = CAPITALS[key]
    return {"country": country.strip().title(), "capital": capital}, (
        f"The capital of {country.strip().title()} is {capital}."
    )


def get_stock_price(symbol: str) -> tuple[dict[str, Any], str]:
    key = symbol.strip().upper()
    if key not in STOCKS:
        raise ToolFailure(f"error: unknown ticker symbol {symbol!r}")
    return {"symbol": key, "price_usd": STOCKS[key]}, f"{key} is trading at {STOCKS[key]} USD"


def convert_currency(amount: float, from_currency: str, to_currency: str) -> tuple[Any, str]:
    source, target = from_currency.strip().upper(), to_currency.strip().upper()
    for code in (source, target):
        if code not in RATES_TO_USD:
            raise ToolFailure(f"error: unsupported currency {code!r}")
    value = round(float(amount) * RATES_TO_USD[source] / RATES_TO_USD[target], 2)
    return (
        {"amount": amount, "from": source, "to": target, "result": value},
        f"{amount} {source} = {value} {target}",
    )


def lookup_order(order_id: str) -> tuple[dict[str, Any], str]:
    key = str(order_id).strip()
    if key.startswith("#"):
        raise ToolFailure("error: order ids are digits only, without '#'")
    if key not in ORDERS:
        raise ToolFailure(f"error: order {order_id!r} not found")
    status, date = ORDERS[key]
    when = f", expected {date}" if status in ("shipped", "processing") else ""
    if status == "delivered":
        when = f", delivered {date}"
    return {"order_id": key, "status": status, "date": date}, f"Order {key}: {status}{when}"


def find_user(username: str) -> tuple[dict[str, Any], str]:
    key = username.strip().lower()
    if key not in USERS:
        raise ToolFailure(f"error: no user named {username!r}")
    return {"username": key, "user_id": USERS[key]}, f"User {key} has id {USERS[key]}"


def list_orders(user_id: str) -> tuple[dict[str, Any], str]:
    key = user_id.strip()
    if key not in USER_ORDERS:
        raise ToolFailure(f"error: unknown user id {user_id!r}; user ids look like 'u-17'")
    orders = USER_ORDERS[key]
    return {"user_id": key, "order_ids": orders}, f"Orders of {key}: {', '.join(orders)}"


def get_contact(name: str) -> tuple[dict[str, Any], str]:
    key = name.strip().lower()
    if key not in CONTACTS:
        raise ToolFailure(f"error: no contact named {name!r}")
    email, phone = CONTACTS[key]
    return {"name": key.title(), "email": email, "phone": phone}, (
        f"{key.title()}: email {email}, phone {phone}"
    )


def get_population(country: str) -> tuple[dict[str, Any], str]:
    key = country.strip().lower()
    if key not in POPULATION_M:
        raise ToolFailure(f"error: no population data for {country!r}")
    return {"country": key.title(), "population_millions": POPULATION_M[key]}, (
        f"{key.title()} has {POPULATION_M[key]} million people"
    )


def flight_status(flight_number: str) -> tuple[dict[str, Any], str]:
    key = flight_number.replace(" ", "").upper()
    if key not in FLIGHTS:
        raise ToolFailure(f"error: flight {flight_number!r} not found")
    return {"flight": key, "status": FLIGHTS[key]}, f"Flight {key} is {FLIGHTS[key]}"


_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.Pow: operator.pow,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 10:
            raise ToolFailure("error: exponent too large")
        return float(_OPS[type(node.op)](_evaluate(node.left), right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.operand)))
    raise ToolFailure("error: only numbers and + - * / ** are allowed")


def calculate(expression: str) -> tuple[dict[str, Any], str]:
    try:
        tree = ast.parse(expression.replace("^", "**").replace("×", "*"), mode="eval")
        value = _evaluate(tree.body)
    except (SyntaxError, ZeroDivisionError) as exc:
        raise ToolFailure(f"error: cannot evaluate {expression!r}: {exc}") from exc
    shown = round(value, 4)
    if shown == int(shown):
        shown = int(shown)
    return {"expression": expression, "result": shown}, f"{expression} = {shown}"


TOOLS: dict[str, AgentTool] = {
    t.name: t
    for t in (
        AgentTool(
            "get_weather",
            "Current weather for a city",
            _params(["city"], city={"type": "string", "description": "City name, e.g. Paris"}),
            get_weather,
        ),
        AgentTool(
            "get_capital",
            "The capital city of a country",
            _params(["country"], country=_STR),
            get_capital,
        ),
        AgentTool(
            "get_stock_price",
            "Latest stock price in USD for a ticker symbol",
            _params(["symbol"], symbol={"type": "string", "description": "Ticker, e.g. AAPL"}),
            get_stock_price,
        ),
        AgentTool(
            "convert_currency",
            "Convert an amount of money from one currency to another",
            _params(
                ["amount", "from_currency", "to_currency"],
                amount={"type": "number"},
                from_currency={"type": "string", "description": "ISO code, e.g. USD"},
                to_currency={"type": "string", "description": "ISO code, e.g. EUR"},
            ),
            convert_currency,
        ),
        AgentTool(
            "lookup_order",
            "Status of a shop order by its order id",
            _params(["order_id"], order_id={"type": "string", "description": "Digits only"}),
            lookup_order,
        ),
        AgentTool(
            "find_user",
            "Find a customer's user id from their username",
            _params(["username"], username=_STR),
            find_user,
        ),
        AgentTool(
            "list_orders",
            "The order ids of a customer, by user id (from find_user)",
            _params(["user_id"], user_id=_STR),
            list_orders,
        ),
        AgentTool(
            "get_contact",
            "Email address and phone number of a contact",
            _params(["name"], name=_STR),
            get_contact,
        ),
        AgentTool(
            "get_population",
            "Population of a country, in millions",
            _params(["country"], country=_STR),
            get_population,
        ),
        AgentTool(
            "flight_status",
            "Current status of a flight by flight number",
            _params(
                ["flight_number"], flight_number={"type": "string", "description": "e.g. BA117"}
            ),
            flight_status,
        ),
        AgentTool(
            "calculate",
            "Evaluate an arithmetic expression",
            _params(["expression"], expression={"type": "string", "description": "e.g. 12 * 7"}),
            calculate,
        ),
    )
}


def run_tool(name: str, arguments: str, style: Style) -> tuple[str, bool]:
    """Run a call as the agent loop would: the result text and whether it is an error."""
    tool = TOOLS.get(name)
    if tool is None:
        return f"error: there is no tool named {name!r}", True
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return f"error: the arguments are not valid JSON: {arguments!r}", True
    if not isinstance(args, dict):
        return "error: the arguments must be a JSON object", True
    required = set(tool.parameters.get("required", ()))
    known = set(tool.parameters.get("properties", {}))
    missing, unknown = sorted(required - set(args)), sorted(set(args) - known)
    if missing or unknown:
        return f"error: missing arguments {missing}, unknown arguments {unknown}", True
    try:
        data, sentence = tool.function(**args)
    except ToolFailure as exc:
        return str(exc), True
    except (TypeError, ValueError) as exc:
        return f"error: bad arguments: {exc}", True
    return (json.dumps(data, ensure_ascii=False) if style == "json" else sentence), False
