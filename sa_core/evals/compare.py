"""Paired comparison of two runs, case by case: regressions, improvements, flaky cases.

A case *passes* in a run when at least half its trials pass. A **regression** is a case that
passes in the baseline and not now; an **improvement** the reverse; a case is **flaky** when
its trials disagree in either run (0 < pass rate < 1) without changing side. Cases in only one
run are listed as ``added`` / ``removed``. The delta of each case's pass rate is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.evals.results import CaseSummary


@dataclass
class Comparison:
    """How a run compares with its baseline."""

    baseline: str
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    deltas: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "baseline": self.baseline,
            "regressions": self.regressions,
            "improvements": self.improvements,
            "flaky": self.flaky,
            "added": self.added,
            "removed": self.removed,
            "deltas": self.deltas,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        """A comparison written by :meth:`as_dict`."""
        return cls(
            baseline=str(data.get("baseline", "")),
            regressions=list(data.get("regressions") or []),
            improvements=list(data.get("improvements") or []),
            flaky=list(data.get("flaky") or []),
            added=list(data.get("added") or []),
            removed=list(data.get("removed") or []),
            deltas=dict(data.get("deltas") or {}),
        )


def _passes(summary: CaseSummary) -> bool:
    return summary.pass_rate >= 0.5


def compare(baseline_id: str, before: list[CaseSummary], after: list[CaseSummary]) -> Comparison:
    """Compare ``after`` (this run) with ``before`` (the baseline), case by case."""
    old = {s.case_id: s for s in before}
    new = {s.case_id: s for s in after}
    result = Comparison(baseline=baseline_id)
    for case_id, now in new.items():
        was = old.get(case_id)
        if was is None:
            result.added.append(case_id)
            continue
        result.deltas[case_id] = round(now.pass_rate - was.pass_rate, 6)
        if _passes(was) and not _passes(now):
            result.regressions.append(case_id)
        elif _passes(now) and not _passes(was):
            result.improvements.append(case_id)
        elif 0 < now.pass_rate < 1 or 0 < was.pass_rate < 1:
            result.flaky.append(case_id)
    result.removed = [c for c in old if c not in new]
    return result
