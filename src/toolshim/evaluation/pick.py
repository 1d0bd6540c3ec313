"""The configuration to serve a model with: each configuration's combined score over the BFCL and agent reports, and the pick.

The combined score of a toolshim configuration is the mean of its two overall accuracies:
BFCL's (share of cases BFCL's AST checker accepts) and the agent suite's (share of tasks whose
final answer is right), each counted on the cases (tasks) that *every* candidate finished, so
that configurations are compared on the same questions. A configuration is a candidate only
when both reports ran it: one that wins single calls but was never seen closing a loop (or
the reverse) is not judged. Ties go to the better agent score (closing the loop is what a
user's agent needs), then to BFCL's, then to the fewer LLM calls per case and task (on a CPU
each call is seconds of a user's wait), then to the label.

**The loop's bar comes first.** A configuration whose one-call agent tasks (a question one
tool call answers: the commonest turn of an agent) fall below :data:`LOOP_BAR` ranks below
every configuration that reaches it, whatever its combined score. The mean alone let BFCL's
parallel categories outweigh the loop: measured on the 0.5B, pythonic beat hermes 60% to 57%
combined while answering 71% of one-call tasks against hermes' 92%, mostly by inventing the
tool's result instead of calling it. BFCL's parallel questions are several calls in one
turn, which an agent also gets one call per turn; a one-call task it fails is a user's
question left unanswered. The bar is the agent-loop issue's target for the embedded model.
When no configuration reaches it (or the agent suite ran no one-call tasks) the combined
score decides alone, and :meth:`Pick.detail` says so.

With one report only (``allow_one_suite``), the pick is made from that suite alone and says
so in :attr:`Pick.basis` and in the stored detail. Baselines (``native``, ``bfcl-prompt``) are
never picked: they are not settings toolshim can serve with.

What is stored (:meth:`Pick.facts`) is *how to emulate*: ``dialect``, ``strategy``,
``constrain`` and ``doubt``, as the winning configuration's engine resolved them (a configuration that
names no dialect used what its registry preferred; recorded in the report's
``meta.settings``, or, for reports older than that, resolved the same way again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from toolshim.capabilities.facts import Source
from toolshim.capabilities.registry import Registry
from toolshim.dialects import get_dialect
from toolshim.dialects.base import PromptOptions
from toolshim.engine import Engine
from toolshim.errors import ConfigError
from toolshim.evaluation.runner import BASELINES, EvalConfig, config_registry
from toolshim.types import Strategy, ToolSpec

__all__ = [
    "LOOP_BAR",
    "Candidate",
    "Pick",
    "Settings",
    "config_settings",
    "engine_settings",
    "pick_configuration",
    "report_key",
    "resolve_settings",
]

LOOP_BAR = 0.8
"""The share of one-call agent tasks a configuration must answer right to rank above those
that do not (see the module docstring)."""

Basis = Literal["bfcl+agent", "bfcl only", "agent only"]
Report = tuple[Mapping[str, Any], Sequence[Any]]
"""(meta, records) as :func:`~toolshim.evaluation.load_report` and
:func:`~toolshim.evaluation.agent_report.load_agent_report` return them."""


@dataclass(frozen=True)
class Settings:
    """How one configuration served the model: what ``--apply`` stores (and the mode, shown)."""

    mode: str
    dialect: str
    strategy: str
    constrain: bool
    doubt: bool = False
    """Fact ``doubt`` was set (a call the model opened unsure of answered without tools)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """From :meth:`as_dict` (a report older than ``doubt`` ran without it)."""
        return cls(
            str(data["mode"]),
            str(data["dialect"]),
            str(data["strategy"]),
            bool(data["constrain"]),
            bool(data.get("doubt", False)),
        )


def config_settings(config: EvalConfig, registry: Registry, key: str, model: str) -> Settings:
    """What ``config``'s engine does for ``model`` at ``key`` with ``registry`` (the options
    :func:`~toolshim.evaluation.runner.engines_for` gives it, the rest from the registry, as
    :meth:`toolshim.engine.Engine.turn` decides)."""
    return _effective(
        Settings(
            mode=config.mode or "auto",
            dialect=config.dialect or registry.preferred_dialect(key, model) or "json",
            strategy=config.strategy or registry.preferred_strategy(key, model).value,
            constrain=config.constrain or registry.constrained(key, model),
            doubt=config.doubt or registry.supports(key, model, "doubt"),
        )
    )


def _effective(settings: Settings) -> Settings:
    """``settings`` as they took effect: ``constrain`` only where the dialect has a JSON Schema
    to hold its replies to under that strategy (hermes and pythonic have none; asked to
    constrain, the engine sends their prompt unconstrained). Reports before this recorded the
    request, not the effect."""
    if not settings.constrain:
        return settings
    options = PromptOptions(decision=settings.strategy == Strategy.DECISION.value)
    held = get_dialect(settings.dialect).holds_to_schema([ToolSpec("f")], options)
    return settings if held else replace(settings, constrain=False)


def engine_settings(engines: Mapping[EvalConfig, Engine], model: str) -> dict[str, Any]:
    """Each configuration's settings as its engine resolves them for ``model`` (recorded in a
    report's ``meta.settings`` at the start of a run)."""
    return {
        c.label: config_settings(c, e.registry, e.upstream.key, model).as_dict()
        for c, e in engines.items()
    }


def report_key(meta: Mapping[str, Any]) -> str:
    """The registry key of the upstream a report measured (``embedded://<file>`` or its URL)."""
    from toolshim.upstreams.openai_http import normalize_base_url

    key = meta.get("upstream_key")
    if key:
        return str(key)
    upstream = meta.get("upstream")
    if not upstream:
        raise ConfigError("the report does not say which upstream it measured (meta.upstream)")
    return normalize_base_url(str(upstream))


def _embedded_facts(meta: Mapping[str, Any]) -> Callable[[Registry], object] | None:
    """For a report of a known embedded model: the recorder of the server's own facts (source
    ``upstream``; never a shipped eval pick, which this very pick may be about)."""
    if meta.get("upstream") != "embedded" or not meta.get("model_file"):
        return None
    from toolshim.local.server import EmbeddedServer

    server = EmbeddedServer(str(meta["model_file"]), ctx_size=int(meta.get("ctx_size") or 4096))
    if server.known is None:
        return None
    model = str(meta.get("model") or server.model)

    def record(registry: Registry) -> None:
        for name, value in server.capabilities().items():
            registry.learn(server.key, model, name, value, Source.UPSTREAM, detail="embedded")

    return record


def resolve_settings(label: str, meta: Mapping[str, Any]) -> Settings | None:
    """The settings configuration ``label`` ran with: from the report's ``meta.settings``, else
    resolved again (None when they depend on an upstream's own facts this report cannot give)."""
    recorded = (meta.get("settings") or {}).get(label)
    if recorded:
        return _effective(Settings.from_dict(recorded))
    config = EvalConfig.parse(label)
    served = _embedded_facts(meta) if config.served else None
    if config.served and served is None:
        return None
    model = str(meta.get("model") or "")
    registry = config_registry(config, served, model)
    try:
        return config_settings(config, registry, report_key(meta), model)
    finally:
        registry.close()


@dataclass(frozen=True)
class Candidate:
    """One toolshim configuration's scores (None: that suite was not judged)."""

    config: str
    settings: Settings
    bfcl: float | None
    bfcl_cases: int
    agent: float | None
    agent_tasks: int
    one_call: float | None = None
    """Accuracy on the agent suite's one-call tasks (None: none were run)."""
    llm_calls: float | None = None
    """Mean LLM calls per case or task, over both suites' common items (None: not recorded)."""

    @property
    def score(self) -> float:
        """The combined score: the mean of the accuracies that were judged."""
        found = [s for s in (self.bfcl, self.agent) if s is not None]
        return sum(found) / len(found)

    @property
    def meets_loop_bar(self) -> bool | None:
        """Whether its one-call agent tasks reach :data:`LOOP_BAR` (None: not judged)."""
        return None if self.one_call is None else self.one_call >= LOOP_BAR - 1e-9

    def ranking(self) -> tuple[float, float, float, float, float]:
        return (
            1.0 if self.meets_loop_bar is not False else 0.0,
            round(self.score, 9),
            self.agent or 0.0,
            self.bfcl or 0.0,
            -(self.llm_calls or 0.0),  # accuracy first; then the fewer LLM calls
        )


@dataclass(frozen=True)
class Pick:
    """The best configuration for one model, with every candidate's scores beside it."""

    model: str
    key: str
    best: Candidate
    candidates: tuple[Candidate, ...]
    basis: Basis
    date: str
    reports: tuple[str, ...]
    missing: str | None = None
    """Why the pick rests on one suite (the report that was missing)."""
    left_out: tuple[tuple[str, str], ...] = field(default=())
    """(configuration, why it was not judged)."""

    def facts(self) -> dict[str, str]:
        """The preference facts to store (source ``eval``)."""
        s = self.best.settings
        return {
            "dialect": s.dialect,
            "strategy": s.strategy,
            "constrain": "yes" if s.constrain else "no",
            "doubt": "yes" if s.doubt else "no",
        }

    def summary(self) -> str:
        """The score in words, e.g. ``combined 56% (BFCL 56% on 64 cases, agent 56% on 70 tasks)``."""
        parts = []
        if self.best.bfcl is not None:
            parts.append(f"BFCL {_pct(self.best.bfcl)} on {self.best.bfcl_cases} cases")
        if self.best.agent is not None:
            parts.append(f"agent {_pct(self.best.agent)} on {self.best.agent_tasks} tasks")
        name = "combined" if self.basis == "bfcl+agent" else self.basis
        return f"{name} {_pct(self.best.score)} ({', '.join(parts)})"

    def detail(self) -> str:
        """The stored facts' detail: configuration, score, date, reports, basis."""
        text = (
            f"eval {self.date}: {self.best.config} scored {self.summary()}, best of "
            f"{len(self.candidates)}; report(s) {' + '.join(self.reports)}"
        )
        if self.missing:
            text += f"; {self.basis}: {self.missing}"
        note = self.loop_bar_note()
        return f"{text}; {note}" if note else text

    def loop_bar_note(self) -> str | None:
        """What the loop's bar changed, in words (None: nothing)."""
        bar = f"{_pct(LOOP_BAR)} of one-call agent tasks"
        if self.best.meets_loop_bar is False:
            return f"no configuration reached {bar}, so the combined score alone decided"
        passed_over = [
            f"{c.config} ({_pct(c.score)} combined, one-call {_pct(c.one_call or 0.0)})"
            for c in self.candidates
            if c.meets_loop_bar is False and c.score > self.best.score + 1e-9
        ]
        if not passed_over:
            return None
        return (
            f"{', '.join(passed_over)} scored higher but answered fewer than {bar} "
            f"({self.best.config}: {_pct(self.best.one_call or 0.0)}), the loop's bar"
        )

    def as_dict(self) -> dict[str, Any]:
        """The pick as JSON (the shipped file's entries, ``--apply``'s record)."""
        out: dict[str, Any] = {
            "config": self.best.config,
            **self.facts(),
            "score": round(self.best.score, 4),
            "bfcl": None if self.best.bfcl is None else round(self.best.bfcl, 4),
            "bfcl_cases": self.best.bfcl_cases,
            "agent": None if self.best.agent is None else round(self.best.agent, 4),
            "agent_tasks": self.best.agent_tasks,
            "one_call": None if self.best.one_call is None else round(self.best.one_call, 4),
            "basis": self.basis,
            "date": self.date,
            "reports": list(self.reports),
            "detail": self.detail(),
        }
        if self.missing:
            out["missing"] = self.missing
        return out


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _toolshim_labels(records: Sequence[Any]) -> list[str]:
    labels = dict.fromkeys(str(r.config) for r in records)
    return [label for label in labels if label not in BASELINES]


def _common_accuracy(
    records: Sequence[Any], labels: Sequence[str], item: Callable[[Any], str], right: str
) -> tuple[dict[str, float], int]:
    """Each label's accuracy on the items every label finished, and how many those are."""
    done: dict[str, set[str]] = {label: set() for label in labels}
    for r in records:
        if r.config in done:
            done[r.config].add(item(r))
    common = set.intersection(*done.values()) if done else set()
    scores = {}
    for label in labels:
        rows = [r for r in records if r.config == label and item(r) in common]
        scores[label] = sum(bool(getattr(r, right)) for r in rows) / len(rows) if rows else 0.0
    return scores, len(common)


def _mean_calls(
    bfcl: Sequence[tuple[Any, str]], agent: Sequence[tuple[Any, str]], labels: Sequence[str]
) -> dict[str, float]:
    """Each label's mean LLM calls per item, over the items (BFCL cases and agent tasks)
    every label finished; a label with an item that recorded none is left out."""
    items = [("bfcl", r, i) for r, i in bfcl] + [("agent", r, i) for r, i in agent]
    done: dict[str, set[tuple[str, str]]] = {label: set() for label in labels}
    for suite, record, item in items:
        if record.config in done:
            done[record.config].add((suite, item))
    common = set.intersection(*done.values()) if done else set()
    means: dict[str, float] = {}
    for label in labels:
        counts = [
            getattr(r, "llm_calls", None)
            for suite, r, item in items
            if r.config == label and (suite, item) in common
        ]
        numbers = [c for c in counts if isinstance(c, int)]
        if numbers and len(numbers) == len(counts):
            means[label] = sum(numbers) / len(numbers)
    return means


def _model(meta: Mapping[str, Any], name: str) -> str:
    model = meta.get("model")
    if not model:
        raise ConfigError(f"the {name} report does not name its model (meta.model)")
    return str(model)


def _date(*metas: Mapping[str, Any]) -> str:
    stamps = [str(m.get("finished") or m.get("started") or "") for m in metas]
    return max(stamps)[:10] or "unknown date"


def pick_configuration(
    bfcl: Report | None,
    agent: Report | None,
    *,
    names: tuple[str, str] = ("BFCL report", "agent report"),
    allow_one_suite: bool = False,
) -> Pick:
    """The best toolshim configuration in ``bfcl`` and ``agent`` (see the module docstring);
    ``names`` name the two reports (file names: shown, stored, and quoted when one is
    missing). ConfigError, saying what is missing, when there is nothing to judge on."""
    reports = [(r, n) for r, n in ((bfcl, names[0]), (agent, names[1])) if r is not None]
    if not reports:
        raise ConfigError("nothing to judge on: no BFCL report and no agent report")
    if len(reports) == 1 and not allow_one_suite:
        absent = names[1] if bfcl is not None else names[0]
        raise ConfigError(
            f"no {absent}: the pick is judged on the BFCL and the agent suite together (a "
            "configuration that wins single calls but cannot close the loop is not the "
            "best); run the other suite too, or pass --one-suite to pick from one"
        )
    models = {_model(meta, name) for (meta, _), name in reports}
    keys = {report_key(meta) for (meta, _), _ in reports}
    if len(models) > 1 or len(keys) > 1:
        raise ConfigError(
            "the reports measured different models: "
            + ", ".join(f"{_model(m, n)!r} at {report_key(m)} ({n})" for (m, _), n in reports)
        )
    bfcl_labels = _toolshim_labels(bfcl[1]) if bfcl else []
    agent_labels = _toolshim_labels(agent[1]) if agent else []
    if bfcl and agent:
        labels = [label for label in bfcl_labels if label in agent_labels]
        left_out = [(x, "in the BFCL report only") for x in bfcl_labels if x not in labels]
        left_out += [(x, "in the agent report only") for x in agent_labels if x not in labels]
        basis: Basis = "bfcl+agent"
        missing = None
    else:
        labels = bfcl_labels or agent_labels
        left_out = []
        basis = "bfcl only" if bfcl else "agent only"
        missing = f"no {'agent' if bfcl else 'BFCL'} report for this model"
    metas = [meta for (meta, _), _ in reports]
    settings: dict[str, Settings] = {}
    for label in labels:
        resolved = [resolve_settings(label, meta) for meta in metas]
        known = {s for s in resolved if s is not None}
        if len(known) < len(set(resolved)) or not known:
            left_out.append((label, "its settings came from an upstream this report cannot name"))
        elif len(known) > 1:  # e.g. auto+served before and after the served default changed
            left_out.append((label, "it ran with different settings in the two reports"))
        else:
            settings[label] = known.pop()
    labels = [label for label in labels if label in settings]
    if not labels:
        ran = {name: _toolshim_labels(records) for (_, records), name in reports}
        raise ConfigError(
            "nothing to judge on: no toolshim configuration is in "
            + ("both reports" if len(reports) == 2 else "the report")
            + " ("
            + "; ".join(f"{n}: {', '.join(v) or 'baselines only'}" for n, v in ran.items())
            + ")"
        )
    bfcl_scores, cases = (
        _common_accuracy(bfcl[1], labels, lambda r: r.case_id, "valid") if bfcl else ({}, 0)
    )
    agent_scores, tasks = (
        _common_accuracy(agent[1], labels, lambda r: r.task_id, "correct") if agent else ({}, 0)
    )
    one_call_records = [r for r in agent[1] if r.kind == "one_call"] if agent else []
    one_call_scores, one_call_tasks = (
        _common_accuracy(one_call_records, labels, lambda r: r.task_id, "correct")
        if one_call_records
        else ({}, 0)
    )
    calls = _mean_calls(
        [(r, r.case_id) for r in bfcl[1]] if bfcl else [],
        [(r, r.task_id) for r in agent[1]] if agent else [],
        labels,
    )
    candidates = sorted(
        (
            Candidate(
                label,
                settings[label],
                bfcl_scores.get(label),
                cases,
                agent_scores.get(label),
                tasks,
                one_call_scores.get(label) if one_call_tasks else None,
                calls.get(label),
            )
            for label in labels
        ),
        key=lambda c: (*(-x for x in c.ranking()), c.config),
    )
    return Pick(
        model=models.pop(),
        key=keys.pop(),
        best=candidates[0],
        candidates=tuple(candidates),
        basis=basis,
        date=_date(*metas),
        reports=tuple(n for _, n in reports),
        missing=missing,
        left_out=tuple(left_out),
    )
