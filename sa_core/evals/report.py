"""The report of a run: a terminal table, the run JSON, JUnit XML, and CI gates.

``report.print()`` shows per case the pass rate, pass@k and pass^k (``k`` = the trials per
case, and pass@1), cost, p50/p95 latency, and every failed expectation with its reason.
``report.gate("pass_at_1>=0.9,regressions=0")`` checks the run's metrics: ``pass_at_1``,
``pass_at_<k>``, ``pass_hat_<k>``, ``pass_rate``, ``cost_usd``, ``latency_p50``,
``latency_p95``, ``failed_cases``, ``regressions``, ``improvements``, ``flaky``.
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sa_core.evals.compare import Comparison
from sa_core.evals.results import RUN_FORMAT, RUN_VERSION, CaseSummary, TrialResult, summarize
from sa_core.evals.stats import percentile

_CONDITION = re.compile(r"^\s*([a-z_0-9]+)\s*(>=|<=|==|!=|=|>|<)\s*(-?[0-9.]+)\s*$")


class GateError(ValueError):
    """A gate expression that cannot be read (the message names the part and the metrics)."""


@dataclass
class GateResult:
    """A gate's verdict: truthy when every condition holds; ``failures`` says which did not."""

    passed: bool
    failures: list[str]

    def __bool__(self) -> bool:
        return self.passed


@dataclass
class Report:
    """A run's results, read from the run that produced them or from the store.

    Attributes:
        run_id: the stored run's id.
        suite: the suite's name.
        target: the target agent.
        trials: every trial, ordered by case and index.
        meta: the run's settings (cache mode and stats, models, trials per case, times).
        comparison: the paired comparison with the baseline, when one was given.
    """

    run_id: str
    suite: str
    target: str
    trials: list[TrialResult]
    meta: dict[str, Any] = field(default_factory=dict)
    comparison: Comparison | None = None

    @property
    def cases(self) -> list[CaseSummary]:
        """Per-case summaries in the suite's order."""
        order: dict[str, list[TrialResult]] = {}
        for trial in self.trials:
            order.setdefault(trial.case_id, []).append(trial)
        return [summarize(case_id, trials) for case_id, trials in order.items()]

    @property
    def k(self) -> int:
        """The k of pass@k and pass^k: the most trials any case ran."""
        return max((c.n for c in self.cases), default=1)

    @property
    def cost_usd(self) -> float:
        """Sum of the stored model-call costs of every trial's tree."""
        return round(sum(t.cost_usd for t in self.trials), 10)

    @property
    def passed(self) -> bool:
        """Whether every case passes in at least half its trials and none regressed."""
        regressed = bool(self.comparison and self.comparison.regressions)
        return all(c.pass_rate >= 0.5 for c in self.cases) and not regressed

    def metrics(self) -> dict[str, float]:
        """The run's metrics, as gates name them (means over cases)."""
        cases = self.cases
        count = len(cases) or 1
        latencies = [t.latency_s for t in self.trials]
        found: dict[str, float] = {
            "pass_rate": sum(c.pass_rate for c in cases) / count,
            "cost_usd": self.cost_usd,
            "latency_p50": percentile(latencies, 50),
            "latency_p95": percentile(latencies, 95),
            "failed_cases": float(sum(1 for c in cases if c.pass_rate < 0.5)),
            "trials": float(len(self.trials)),
        }
        for k in range(1, self.k + 1):
            found[f"pass_at_{k}"] = sum(c.pass_at(k) for c in cases) / count
            found[f"pass_hat_{k}"] = sum(c.pass_hat(k) for c in cases) / count
        comparison = self.comparison
        for name in ("regressions", "improvements", "flaky"):
            found[name] = float(len(getattr(comparison, name))) if comparison else 0.0
        return found

    def gate(self, expression: str) -> GateResult:
        """Check ``metric<op>value`` conditions separated by commas.

        Raises:
            GateError: a condition cannot be read or names an unknown metric.
        """
        metrics = self.metrics()
        failures = []
        for part in filter(None, (p.strip() for p in expression.split(","))):
            match = _CONDITION.match(part)
            if match is None:
                raise GateError(
                    f"gate condition {part!r} is not <metric><op><number> (ops: >= <= > < = !=)"
                )
            name, op, raw = match.groups()
            if name not in metrics:
                raise GateError(
                    f"gate condition {part!r}: unknown metric {name!r}; known: "
                    + ", ".join(sorted(metrics))
                )
            value, limit = metrics[name], float(raw)
            ok = {
                ">=": value >= limit,
                "<=": value <= limit,
                ">": value > limit,
                "<": value < limit,
                "=": abs(value - limit) < 1e-9,
                "==": abs(value - limit) < 1e-9,
                "!=": abs(value - limit) >= 1e-9,
            }[op]
            if not ok:
                failures.append(f"{name} is {value:.4g}, gate wants {op}{raw}")
        return GateResult(not failures, failures)

    def to_json(self) -> dict[str, Any]:
        """The run JSON (versioned)."""
        return {
            "format": RUN_FORMAT,
            "version": RUN_VERSION,
            "run_id": self.run_id,
            "suite": self.suite,
            "target": self.target,
            **self.meta,
            "summary": {**self.metrics(), "k": self.k},
            "cases": [c.as_dict() for c in self.cases],
            "trials": [t.as_dict() for t in self.trials],
            "comparison": self.comparison.as_dict() if self.comparison else None,
        }

    def write(self, path: str | Path) -> Path:
        """Write the run JSON (``.xml``: JUnit instead); returns the path."""
        target = Path(path)
        if target.suffix == ".xml":
            return self.write_junit(target)
        target.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")
        return target

    def write_junit(self, path: str | Path) -> Path:
        """Write JUnit XML: one ``testcase`` per trial, failures with their reasons."""
        target = Path(path)
        failed = sum(1 for t in self.trials if not t.passed)
        suite = ET.Element(
            "testsuite",
            name=self.suite,
            tests=str(len(self.trials)),
            failures=str(failed),
            errors="0",
        )
        for trial in self.trials:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{self.suite}.{trial.case_id}",
                name=f"{trial.case_id}[{trial.trial}]",
                time=f"{trial.latency_s:.3f}",
            )
            if not trial.passed:
                reasons = [f"{s.name}: {s.reason}" for s in trial.failures]
                if trial.error:
                    reasons.insert(0, f"error: {trial.error}")
                failure = ET.SubElement(case, "failure", message="; ".join(reasons)[:500])
                failure.text = "\n".join(reasons)
            ET.SubElement(case, "properties")
            if trial.thread_id:
                ET.SubElement(case[-1], "property", name="thread_id", value=trial.thread_id)
        root = ET.Element("testsuites")
        root.append(suite)
        ET.ElementTree(root).write(target, encoding="utf-8", xml_declaration=True)
        return target

    def print(self, file: IO[str] | None = None) -> None:
        """Print the terminal table and the failed expectations."""
        out = file or sys.stdout
        k = self.k
        rows = [("case", "pass", "pass@1", f"pass@{k}", f"pass^{k}", "cost $", "p50 s", "p95 s")]
        for c in self.cases:
            rows.append(
                (
                    c.case_id,
                    f"{c.passed}/{c.n}",
                    f"{c.pass_at(1):.2f}",
                    f"{c.pass_at(k):.2f}",
                    f"{c.pass_hat(k):.2f}",
                    f"{c.cost_usd:.4f}",
                    f"{c.latency_p50:.2f}",
                    f"{c.latency_p95:.2f}",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        print(f"suite {self.suite} -> {self.target}  run {self.run_id}", file=out)
        for row in rows:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)), file=out)
        m = self.metrics()
        print(
            f"pass@1 {m['pass_at_1']:.3f}  cost ${self.cost_usd:.4f}  "
            f"p50 {m['latency_p50']:.2f}s  p95 {m['latency_p95']:.2f}s",
            file=out,
        )
        for c in self.cases:
            for f in c.failures:
                print(f"  FAIL {c.case_id}[{f['trial']}] {f['name']}: {f['reason']}", file=out)
        if self.comparison is not None:
            cmp = self.comparison
            print(
                f"vs {cmp.baseline}: regressions {cmp.regressions or 'none'}, improvements "
                f"{cmp.improvements or 'none'}, flaky {cmp.flaky or 'none'}",
                file=out,
            )


def report_from_json(data: dict[str, Any]) -> Report:
    """A report from a run JSON document.

    Raises:
        ValueError: not a run JSON, or a newer version than this release reads.
    """
    if data.get("format") != RUN_FORMAT:
        raise ValueError(
            f"not an eval run JSON (format {data.get('format')!r}, want {RUN_FORMAT!r})"
        )
    if int(data.get("version", 0)) > RUN_VERSION:
        raise ValueError(f"run JSON version {data.get('version')} is newer than {RUN_VERSION}")
    skip = {
        "format",
        "version",
        "run_id",
        "suite",
        "target",
        "summary",
        "cases",
        "trials",
        "comparison",
    }
    comparison = data.get("comparison")
    return Report(
        run_id=str(data["run_id"]),
        suite=str(data["suite"]),
        target=str(data["target"]),
        trials=[TrialResult.from_dict(t) for t in data.get("trials") or []],
        meta={k: v for k, v in data.items() if k not in skip},
        comparison=Comparison.from_dict(comparison) if comparison else None,
    )
