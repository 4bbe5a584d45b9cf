"""Stored runs: saving a run, reading it back (:func:`load_run`), rescoring it, baselines.

A run's row keeps the suite as it ran (``document.suite_document``), so a stored run is scored
again from its threads alone: :meth:`StoredRun.rescore` reads each trial's stored tree and
scores it with the case's expectations, the suite's scorers and any scorers given, without
running the agent (0 agent model calls; judge rubrics ask the judge model).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sa_core.evals.cache import CacheStats, CachingProvider, TrialKeys
from sa_core.evals.compare import compare
from sa_core.evals.context import judge_model
from sa_core.evals.judge import Judge
from sa_core.evals.report import Report, report_from_json
from sa_core.evals.results import TrialResult
from sa_core.evals.scorers import Scorer, resolve_scorer
from sa_core.evals.scoring import score_trial
from sa_core.evals.suite import Suite

if TYPE_CHECKING:
    from sa_core.runtime import Runtime


class RunNotFoundError(LookupError):
    """No stored run has this id (and no file has this path)."""


async def save_run(
    runtime: Runtime,
    run_id: str,
    suite: Suite,
    *,
    status: str,
    meta: dict[str, Any],
    trials: list[TrialResult],
    baseline: Report | None = None,
) -> Report:
    """Store the run's row (its trials are stored one by one as they finish)."""
    report = Report(run_id, suite.suite, suite.target, sorted(trials, key=_order(suite)), meta=meta)
    if baseline is not None:
        report.comparison = compare(baseline.run_id, baseline.cases, report.cases)
        meta["baseline"] = baseline.run_id
    document = {**meta, "comparison": report.comparison.as_dict() if report.comparison else None}
    summary = {"metrics": report.metrics(), "cases": [c.as_dict() for c in report.cases]}
    await runtime.store.save_eval_run(
        run_id,
        suite=suite.suite,
        target=suite.target,
        status=status,
        summary=summary,
        document=document,
    )
    return report


def _order(suite: Suite) -> Any:
    position = {c.id: i for i, c in enumerate(suite.cases)}
    return lambda t: (position.get(t.case_id, len(position)), t.trial)


@dataclass
class StoredRun:
    """A run read from the store: its suite, its report, and :meth:`rescore`."""

    runtime: Runtime
    run_id: str
    suite: Suite
    report: Report
    row: dict[str, Any] = field(default_factory=dict)

    async def rescore(
        self,
        scorers: Sequence[Scorer | str | Mapping[str, Any]] = (),
        *,
        models: Mapping[str, str] | None = None,
    ) -> Report:
        """Score every stored trial again from its stored tree; store and return the report.

        Args:
            scorers: scorers to add to the case's expectations and the suite's scorers.
            models: ``{"judge": model}`` to judge with another model of the pack.
        """
        _, scope = self.runtime.registry.entry_agent(self.suite.target)
        model = judge_model(scope, self.suite, models or {})
        judge = None
        if model is not None and model.provider in self.runtime.providers:
            provider: Any = self.runtime.providers[model.provider]
            if self.report.meta.get("cache", "off") != "off":  # judge answers the run recorded
                stats = CacheStats()
                keys = TrialKeys(self.runtime.store)
                provider = CachingProvider(
                    provider, self.runtime.store, "replay-or-record", keys, stats
                )
            judge = Judge(model, provider)
        context = _Rescoring(self.runtime, self.suite, judge)
        extra = [resolve_scorer(s) for s in scorers]
        results = []
        for trial in self.report.trials:
            case = self.suite.case(trial.case_id)
            result = await score_trial(
                context, case, trial.trial, trial.thread_id, trial.error, extra
            )
            await self.runtime.store.save_eval_trial(
                self.run_id,
                case.id,
                trial.trial,
                thread_id=trial.thread_id,
                passed=result.passed,
                score=result.score,
                result=result.as_dict(),
            )
            results.append(result)
        meta = dict(self.report.meta)
        meta["rescored"] = True
        self.report = await save_run(
            self.runtime, self.run_id, self.suite, status="finished", meta=meta, trials=results
        )
        return self.report


@dataclass
class _Rescoring:
    runtime: Runtime
    suite: Suite
    judge: Judge | None


class _Loader:
    """``await load_run(rt, run_id)`` and ``await load_run(rt, run_id).rescore([...])``."""

    def __init__(self, runtime: Runtime, run_id: str) -> None:
        self.runtime = runtime
        self.run_id = run_id

    def __await__(self) -> Any:
        return read_run(self.runtime, self.run_id).__await__()

    async def rescore(
        self, scorers: Sequence[Scorer | str | Mapping[str, Any]] = (), **options: Any
    ) -> Report:
        """Read the run and score it again (see :meth:`StoredRun.rescore`)."""
        run = await read_run(self.runtime, self.run_id)
        return await run.rescore(scorers, **options)


def load_run(runtime: Runtime, run_id: str) -> _Loader:
    """A stored run by id, to await (a :class:`StoredRun`) or to ``.rescore([...])`` at once."""
    return _Loader(runtime, run_id)


async def read_run(runtime: Runtime, run_id: str) -> StoredRun:
    """Read a stored run with its trials.

    Raises:
        RunNotFoundError: no run has this id.
    """
    row = await runtime.store.get_eval_run(run_id)
    if row is None:
        raise RunNotFoundError(f"no stored eval run {run_id!r}; `sa eval list` shows the runs")
    document = dict(row.get("document") or {})
    suite = Suite.parse(
        document.get("suite_document") or {}, source=document.get("suite_path") or f"<run {run_id}>"
    )
    trials = [TrialResult.from_dict(t["result"]) for t in row["trials"] if t.get("result")]
    data = {
        "format": "sa-eval-run",
        "version": 1,
        "run_id": run_id,
        "suite": row["suite"],
        "target": row["target"],
        **document,
        "trials": [t.as_dict() for t in trials],
    }
    report = report_from_json(data)
    report.trials.sort(key=_order(suite))
    return StoredRun(runtime, run_id, suite, report, row)


async def baseline_report(runtime: Runtime, baseline: str | Path) -> Report:
    """A baseline: a run JSON file when the path exists, else a stored run id.

    Raises:
        RunNotFoundError: neither a file nor a stored run.
    """
    path = Path(baseline)
    if path.suffix == ".json" or path.exists():
        if not path.exists():
            raise RunNotFoundError(f"baseline file {path} does not exist")
        return report_from_json(json.loads(path.read_text(encoding="utf-8")))
    return (await read_run(runtime, str(baseline))).report
