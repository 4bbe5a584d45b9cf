"""Scores and scorers: :class:`Score`, the :func:`scorer` decorator and the built-in scorers.

A scorer is an async function of a :class:`~sa_core.evals.view.TrialView` returning a
:class:`Score` (or a ``bool``, or a number in [0, 1])::

    @scorer
    async def short_answer(view: TrialView) -> Score:
        return Score(passed=len(view.final) < 400, reason=f"{len(view.final)} characters")

Decorated scorers are registered by name, so a suite file can list them under ``scorers``.
Built-in: ``no_errors``, ``{cost: {max_usd}}``, ``{tokens: {max}}``, ``{latency: {max_s}}``,
``{turns: {max}}``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.evals.view import TrialView


@dataclass
class Score:
    """One expectation's (or scorer's) verdict on a trial.

    Attributes:
        passed: whether it holds.
        score: in [0, 1] (1.0 when passed unless given).
        reason: why, in words a reader can act on.
        name: the expectation or scorer (``tools``, ``tree[0]``, ``judge[1]``, ...).
        weight: its weight in the case's score.
        required: a failure fails the case whatever the other scores.
        details: what decided it (a judge's samples and reasoning, the calls compared...).
    """

    passed: bool
    score: float | None = None
    reason: str = ""
    name: str = ""
    weight: float = 1.0
    required: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.score is None:
            self.score = 1.0 if self.passed else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The score as JSON-ready data."""
        return {
            "name": self.name,
            "passed": self.passed,
            "score": self.score,
            "reason": self.reason,
            "weight": self.weight,
            "required": self.required,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Score:
        """A score written by :meth:`as_dict`."""
        return cls(
            passed=bool(data["passed"]),
            score=float(data.get("score", 1.0 if data["passed"] else 0.0)),
            reason=str(data.get("reason", "")),
            name=str(data.get("name", "")),
            weight=float(data.get("weight", 1.0)),
            required=bool(data.get("required", False)),
            details=dict(data.get("details") or {}),
        )


ScorerResult = Score | bool | float
ScorerFunction = Callable[["TrialView"], Awaitable[ScorerResult]]


@dataclass(frozen=True)
class Scorer:
    """A named scorer: an async function of a trial's view."""

    name: str
    fn: ScorerFunction

    async def __call__(self, view: TrialView) -> Score:
        """Score a trial; a ``bool`` or number result becomes a :class:`Score`."""
        result = await self.fn(view)
        if isinstance(result, Score):
            result.name = result.name or self.name
            return result
        if isinstance(result, bool):
            return Score(passed=result, name=self.name)
        value = float(result)
        return Score(passed=value >= 1.0, score=value, name=self.name)


SCORERS: dict[str, Scorer] = {}
"""Scorers by name: the built-ins and every :func:`scorer`-decorated function."""


def scorer(fn: ScorerFunction | None = None, *, name: str | None = None) -> Any:
    """Make an async function of a :class:`TrialView` a scorer, registered by name.

    Raises:
        TypeError: the function is not ``async``.
    """

    def wrap(function: ScorerFunction) -> Scorer:
        if not inspect.iscoroutinefunction(function):
            raise TypeError(f"@scorer needs an async function; {function.__name__} is not")
        made = Scorer(name or function.__name__, function)
        SCORERS[made.name] = made
        return made

    return wrap(fn) if fn is not None else wrap


def _no_errors() -> Scorer:
    async def no_errors(view: TrialView) -> Score:
        failed = [c for calls in view.tool_calls.values() for c in calls if not c.ok]
        problems = [f"tool {c.name} failed: {(c.result or '')[:120]}" for c in failed]
        if view.error:
            problems.insert(0, f"the trial failed: {view.error}")
        if view.usage.failed_model_calls:
            problems.append(f"{view.usage.failed_model_calls} failed model call(s)")
        return Score(passed=not problems, reason="; ".join(problems) or "no errors")

    return Scorer("no_errors", no_errors)


def limit_score(kind: str, value: float, limit: float, unit: str) -> Score:
    """Passed when ``value`` is at most ``limit``."""
    ok = value <= limit
    return Score(
        passed=ok,
        name=kind,
        reason=f"{kind} {value:g}{unit} {'<=' if ok else '>'} {limit:g}{unit}",
        details={"value": value, "limit": limit},
    )


def limit_scorer(kind: str, options: Mapping[str, Any]) -> Scorer:
    """``cost``/``tokens``/``latency``/``turns`` with their limit, as a scorer."""
    readers: dict[str, tuple[str, str, Callable[[TrialView], float]]] = {
        "cost": ("max_usd", " USD", lambda v: v.cost_usd),
        "tokens": ("max", " tokens", lambda v: float(v.usage.total_tokens)),
        "latency": ("max_s", " s", lambda v: v.latency_s),
        "turns": ("max", " model calls", lambda v: float(v.turns)),
    }
    key, unit, read = readers[kind]
    if key not in options:
        raise ValueError(f"scorer {kind!r} needs {{{key}: ...}}")
    limit = float(options[key])

    async def check(view: TrialView) -> Score:
        return limit_score(kind, read(view), limit, unit)

    return Scorer(kind, check)


def resolve_scorer(spec: str | Mapping[str, Any] | Scorer) -> Scorer:
    """A scorer from a suite's ``scorers`` entry: a name, ``{name: options}`` or a scorer.

    Raises:
        ValueError: an unknown name (the message lists the known ones) or bad options.
    """
    if isinstance(spec, Scorer):
        return spec
    if isinstance(spec, str):
        if spec == "no_errors":
            return _no_errors()
        if spec in SCORERS:
            return SCORERS[spec]
        raise ValueError(
            f"unknown scorer {spec!r}; known: no_errors, cost, tokens, latency, turns"
            + "".join(f", {n}" for n in sorted(SCORERS))
        )
    if len(spec) != 1:
        raise ValueError(f"a scorer entry is a name or {{name: options}}, not {dict(spec)}")
    ((kind, options),) = spec.items()
    if kind in ("cost", "tokens", "latency", "turns"):
        return limit_scorer(kind, dict(options or {}))
    return resolve_scorer(kind)
