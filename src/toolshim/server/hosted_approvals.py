"""Approvals for hosted MCP tools on Responses: which calls need one, and the answers given.

``require_approval`` is ``"always"`` (the default), ``"never"``, or ``{"always": {"tool_names":
[…]}, "never": {"tool_names": […]}}``: a tool named under ``never`` runs at once, and any other
waits (approval is the safe default). A call that needs one ends the request with an
``mcp_approval_request`` item; the next request brings that item back in its ``input``
(previous response ids are not followed for this) with an ``mcp_approval_response``
(``approval_request_id``, ``approve``); the proxy then runs the approved call, or tells the
model it was refused, before it asks the model again.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolshim.errors import InvalidRequestError

__all__ = ["Approval", "ApprovalRequest", "ApprovalRule", "approval_rule", "take_approvals"]


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """Which of a server's tools need an approval before they run."""

    default: bool = True
    always: frozenset[str] = field(default_factory=frozenset)
    never: frozenset[str] = field(default_factory=frozenset)

    def needs(self, name: str) -> bool:
        if name in self.never:
            return False
        return name in self.always or self.default


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A call waiting for the caller's approval (an ``mcp_approval_request`` item)."""

    server: str
    name: str
    arguments: str
    id: str = field(default_factory=lambda: f"mcpr_{secrets.token_hex(12)}")


@dataclass(frozen=True, slots=True)
class Approval:
    """The caller's answer to an approval request, with the request it answers."""

    request: ApprovalRequest
    approve: bool
    reason: str | None = None


def approval_rule(value: Any, label: str, param: str) -> ApprovalRule:
    """``require_approval`` read into a rule (InvalidRequestError for a shape it cannot be)."""
    if value is None or value == "always":
        return ApprovalRule()
    if value == "never":
        return ApprovalRule(default=False)
    if isinstance(value, Mapping):
        always = _names(value.get("always"), label, f"{param}.always")
        never = _names(value.get("never"), label, f"{param}.never")
        return ApprovalRule(always=always, never=never)
    raise InvalidRequestError(
        f'mcp tool {label!r}: require_approval must be "always", "never" or '
        '{"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}',
        param=param,
    )


def _names(value: Any, label: str, param: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    names = value.get("tool_names") if isinstance(value, Mapping) else None
    if names is None:
        return frozenset()
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidRequestError(
            f"mcp tool {label!r}: tool_names must be a list of names", param=param
        )
    return frozenset(names)


def take_approvals(payload: dict[str, Any]) -> list[Approval]:
    """Take the ``mcp_approval_response`` items out of the input, each with the
    ``mcp_approval_request`` item it answers (taken out too); a response whose request is not
    in the input is a 400."""
    items = payload.get("input")
    if not isinstance(items, list):
        return []
    requests = {
        item["id"]: item
        for item in items
        if isinstance(item, Mapping)
        and item.get("type") == "mcp_approval_request"
        and isinstance(item.get("id"), str)
    }
    answers = [
        (index, item)
        for index, item in enumerate(items)
        if isinstance(item, Mapping) and item.get("type") == "mcp_approval_response"
    ]
    if not answers and not requests:
        return []
    approvals: list[Approval] = []
    for index, item in answers:
        asked = requests.get(str(item.get("approval_request_id")))
        if asked is None:
            raise InvalidRequestError(
                f"input.{index}: mcp_approval_response answers {item.get('approval_request_id')!r}"
                ", but no mcp_approval_request item with that id is in the input (send the "
                "previous response's output items back with it)",
                param=f"input.{index}.approval_request_id",
            )
        request = ApprovalRequest(
            str(asked.get("server_label") or ""),
            str(asked.get("name") or ""),
            str(asked.get("arguments") or "{}"),
            str(asked["id"]),
        )
        reason = item.get("reason")
        approvals.append(
            Approval(
                request, item.get("approve") is True, reason if isinstance(reason, str) else None
            )
        )
    payload["input"] = [
        item
        for item in items
        if not (
            isinstance(item, Mapping)
            and item.get("type") in ("mcp_approval_request", "mcp_approval_response")
        )
    ]
    return approvals
