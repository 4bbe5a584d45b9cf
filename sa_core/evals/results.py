"""A run's results: trials, per-case summaries, and the run JSON (``format: sa-eval-run``).

The run JSON is versioned (:data:`RUN_FORMAT`, :data:`RUN_VERSION`): a later release reads
older versions, and a baseline may be a run JSON file instead of a stored run id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sa_core.evals.scorers import Score
from sa_core.evals.stats import pass_at_k, pass_hat_k, percentile

RUN_FORMAT = "sa-eval-run"
RUN_VERSION = 1


@dataclass
class TrialResult:
    """One trial: its thread, verdict, scores, and the stored figures it was scored on."""

    case_id: str
    trial: int
    thread_id: str | None
    passed: bool
    score: float
    scores: list[Score] = field(default_factory=list)
    cost_usd: float = 0.0
    tokens: int = 0
    model_calls: int = 0
    latency_s: float = 0.0
    status: str = "completed"
    outcome: str | None = None
    error: str | None = None
    cache_miss: bool = False
    tree: list[dict[str, Any]] = field(default_factory=list)
    """The trial's descendant threads: ``path``, ``agent``, ``thread_id``, ``mode``, ``status``
    and their ``calls`` (``name``, ``arguments``, ``ok``), as the tree expectations saw them."""

    @property
    def failures(self) -> list[Score]:
        """The scores that did not pass."""
        return [s for s in self.scores if not s.passed]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "case_id": self.case_id,
            "trial": self.trial,
            "thread_id": self.thread_id,
            "passed": self.passed,
            "score": self.score,
            "scores": [s.as_dict() for s in self.scores],
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
            "model_calls": self.model_calls,
            "latency_s": self.latency_s,
            "status": self.status,
            "outcome": self.outcome,
            "error": self.error,
            "cache_miss": self.cache_miss,
            "tree": self.tree,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """A trial written by :meth:`as_dict`."""
        return cls(
            case_id=str(data["case_id"]),
            trial=int(data["trial"]),
            thread_id=data.get("thread_id"),
            passed=bool(data["passed"]),
            score=float(data.get("score", 0.0)),
            scores=[Score.from_dict(s) for s in data.get("scores") or []],
            cost_usd=float(data.get("cost_usd") or 0.0),
            tokens=int(data.get("tokens") or 0),
            model_calls=int(data.get("model_calls") or 0),
            latency_s=float(data.get("latency_s") or 0.0),
            status=str(data.get("status") or "completed"),
            outcome=data.get("outcome"),
            error=data.get("error"),
            cache_miss=bool(data.get("cache_miss")),
            tree=list(data.get("tree") or []),
        )


@dataclass
class CaseSummary:
    """A case over its trials: pass rate, pass@k and pass^k, cost, latency, failures."""

    case_id: str
    n: int
    passed: int
    cost_usd: float
    latency_p50: float
    latency_p95: float
    failures: list[dict[str, Any]]

    @property
    def pass_rate(self) -> float:
        """Passing trials over trials."""
        return self.passed / self.n if self.n else 0.0

    def pass_at(self, k: int) -> float:
        """pass@k (closed form)."""
        return pass_at_k(self.n, self.passed, k) if self.n else 0.0

    def pass_hat(self, k: int) -> float:
        """pass^k (closed form)."""
        return pass_hat_k(self.n, self.passed, k) if self.n else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with pass@k and pass^k for every k up to n."""
        ks = range(1, self.n + 1)
        return {
            "id": self.case_id,
            "n": self.n,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "pass_at_k": {str(k): self.pass_at(k) for k in ks},
            "pass_hat_k": {str(k): self.pass_hat(k) for k in ks},
            "cost_usd": self.cost_usd,
            "latency_p50": self.latency_p50,
            "latency_p95": self.latency_p95,
            "failures": self.failures,
        }


def summarize(case_id: str, trials: list[TrialResult]) -> CaseSummary:
    """A case's summary from its trials."""
    latencies = [t.latency_s for t in trials]
    failures = [
        {"trial": t.trial, "name": s.name, "reason": s.reason}
        for t in sorted(trials, key=lambda t: t.trial)
        for s in (t.failures or ([Score(False, name="error", reason=t.error)] if t.error else []))
    ]
    return CaseSummary(
        case_id=case_id,
        n=len(trials),
        passed=sum(1 for t in trials if t.passed),
        cost_usd=round(sum(t.cost_usd for t in trials), 10),
        latency_p50=percentile(latencies, 50),
        latency_p95=percentile(latencies, 95),
        failures=failures,
    )
