"""An answer that says nothing of a call that failed: asked again from the results.

Asked for the weather in the capital of Kenya, the 1.5B looked up Nairobi, got ``error: no
weather data for Nairobi`` and answered "The weather in Nairobi is currently sunny." (all 6
error-mid-chain tasks of the agent suite went so). A tool whose call failed and that no call
has made work since (:func:`unrecovered_errors`) is a failure the user must hear about; an
answer with no word of one (:data:`ACKNOWLEDGED`: error, failed, unable, not found, …) is
replaced by the answer asked for without tools, whose note after the results says "if a
result is an error, say what failed" (:mod:`.history`). One more request, only then.

Not in a coding agent's turn: a test run that failed before the fix is the usual path, and
its answer ("fixed") need not repeat the failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolshim.engine.outcomes import call_outcomes
from toolshim.types import Message

__all__ = ["ACKNOWLEDGED", "UNREPORTED_WARNING", "reports_failure", "unrecovered_errors"]

ACKNOWLEDGED = re.compile(
    r"\b(errors?|fail\w*|unable|could\s*n[o']?t|can\s*n[o']?t|cannot|unknown|invalid|"
    r"unsupported|unavailable|unrecogni[sz]ed|sorry|unfortunately|problem|issue|missing|"
    r"den(y|ied|ial)|refus\w*|reject\w*|declin\w*|forbidden|unauthori[sz]ed|blocked|"
    r"timed\s+out|time-?out|not\s+allowed|disallowed|no\s+permission|exceed\w*|no\s+(\w+\s+){0,2}(such|data|record|results?|information|user|contact|order|"
    r"match\w*|entry|account)|(have|has|had|there\s+(is|are|was|were))\s+no)\b"
    r"|(\bnot|n't)\s+(found|available|supported|known|exist\w*|possible|recogni[sz]ed|valid|work)",
    re.IGNORECASE,
)
"""Words of an answer that tells of a failure."""

UNREPORTED_WARNING = (
    "the model's answer said nothing of a call that failed; answered again without tools, "
    "from the results"
)


def unrecovered_errors(messages: Sequence[Message]) -> tuple[str, ...]:
    """The results since the user's last message of calls that failed, of tools no later call
    made work."""
    outcomes = call_outcomes(messages)
    return tuple(
        o.result
        for i, o in enumerate(outcomes)
        if not o.worked and not any(n.name == o.name and n.worked for n in outcomes[i + 1 :])
    )


def reports_failure(answer: str) -> bool:
    """Whether ``answer`` tells of a failure (a word of :data:`ACKNOWLEDGED`). Not the error's
    own words: "no weather data for Nairobi" and "the weather in Nairobi is sunny" share
    Nairobi."""
    return ACKNOWLEDGED.search(answer) is not None
