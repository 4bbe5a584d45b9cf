"""Eval runs of a package's agents: list them, read one (cases x trials), compare two.

Runs are written by ``sa eval run`` / :func:`sa_core.evals.run_suite` on the same database
(see ``docs/evals.md``); a package lists the runs whose target is one of its agents. Each trial
names its thread, which opens under ``threads/{id}`` like any thread.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.params import FromPath, FromQuery

from sa_core.server.context import PackDep, RuntimeDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import Base


class EvalRunSummaryOut(Base, kw_only=True):
    """A stored run: its suite, target, status, and headline figures."""

    id: str
    suite: str
    target: str
    status: str
    created_at: int
    finished_at: int | None
    trials: int
    pass_at_1: float
    cost_usd: float


class EvalRunsOut(Base, kw_only=True):
    """Runs, newest first."""

    runs: list[EvalRunSummaryOut]
    total: int


class EvalScoreOut(Base, kw_only=True):
    """One expectation's verdict on a trial, with the reason (and a judge's samples)."""

    name: str
    passed: bool
    score: float
    reason: str
    weight: float
    required: bool
    details: dict[str, Any]


class EvalTrialOut(Base, kw_only=True):
    """One trial: its thread, verdict, scores and figures."""

    case_id: str
    trial: int
    thread_id: str | None
    passed: bool
    score: float
    scores: list[EvalScoreOut]
    cost_usd: float
    tokens: int
    model_calls: int
    latency_s: float
    status: str
    outcome: str | None
    error: str | None
    cache_miss: bool
    tree: list[dict[str, Any]]
    """Descendant threads: ``path``, ``agent``, ``thread_id``, ``mode``, ``status``, ``calls``."""


class EvalCaseOut(Base, kw_only=True):
    """A case over its trials: pass rate, pass@k and pass^k by k, cost, latency, failures."""

    id: str
    n: int
    passed: int
    pass_rate: float
    pass_at_k: dict[str, float]
    pass_hat_k: dict[str, float]
    cost_usd: float
    latency_p50: float
    latency_p95: float
    failures: list[dict[str, Any]]


class EvalComparisonOut(Base, kw_only=True):
    """A run against a baseline, case by case."""

    baseline: str
    regressions: list[str]
    improvements: list[str]
    flaky: list[str]
    added: list[str]
    removed: list[str]
    deltas: dict[str, float]


class EvalRunOut(Base, kw_only=True):
    """A run: its cases and every trial."""

    run_id: str
    suite: str
    target: str
    status: str
    cache: str
    summary: dict[str, float]
    cases: list[EvalCaseOut]
    trials: list[EvalTrialOut]
    comparison: EvalComparisonOut | None


def _summary(row: dict[str, Any]) -> EvalRunSummaryOut:
    metrics = (row.get("summary") or {}).get("metrics") or {}
    return EvalRunSummaryOut(
        id=row["id"],
        suite=row["suite"],
        target=row["target"],
        status=row["status"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        trials=int(metrics.get("trials", 0)),
        pass_at_1=float(metrics.get("pass_at_1", 0.0)),
        cost_usd=float(metrics.get("cost_usd", 0.0)),
    )


async def _run(runtime: Any, package: str, run_id: str) -> tuple[Any, dict[str, Any]]:
    from sa_core.evals.storedrun import RunNotFoundError, read_run

    try:
        run = await read_run(runtime, run_id)
    except RunNotFoundError:
        raise ApiError(
            404, "not_found", f"No eval run {run_id!r} in package {package!r}."
        ) from None
    if not run.report.target.startswith(f"{package}/"):
        raise ApiError(404, "not_found", f"No eval run {run_id!r} in package {package!r}.")
    return run.report, run.row


def _run_out(report: Any, row: dict[str, Any]) -> EvalRunOut:
    from sa_core.server.schemas import convert

    data = report.to_json()
    data["status"] = row["status"]
    data["cache"] = str(data.get("cache", "off"))
    data["summary"] = {k: float(v) for k, v in data["summary"].items()}
    return convert(data, EvalRunOut)


class EvalsController(Controller):
    """Eval runs whose target is an agent of this package."""

    path = "/evals"

    @get("/runs", responses=errors(), summary="List eval runs")
    async def list_runs(
        self,
        pack: PackDep,
        runtime: RuntimeDep,
        suite: FromQuery[str | None] = None,
        limit: FromQuery[int] = 50,
        offset: FromQuery[int] = 0,
    ) -> EvalRunsOut:
        """Runs of this package's agents, newest first (``suite`` filters by suite name)."""
        limit, offset = max(1, min(limit, 200)), max(offset, 0)
        rows, total = await runtime.store.list_eval_runs(
            suite=suite, package=pack.package, limit=limit, offset=offset
        )
        return EvalRunsOut(runs=[_summary(r) for r in rows], total=total)

    @get("/runs/{run_id:str}", responses=errors(404), summary="Read an eval run")
    async def get_run(
        self, pack: PackDep, runtime: RuntimeDep, run_id: FromPath[str]
    ) -> EvalRunOut:
        """A run with its cases (pass@k, pass^k, cost, latency) and every trial's scores."""
        report, row = await _run(runtime, pack.package, run_id)
        return _run_out(report, row)

    @get(
        "/runs/{run_id:str}/compare/{baseline:str}",
        responses=errors(404),
        summary="Compare an eval run with a baseline run",
    )
    async def compare_runs(
        self, pack: PackDep, runtime: RuntimeDep, run_id: FromPath[str], baseline: FromPath[str]
    ) -> EvalComparisonOut:
        """Regressions, improvements and flaky cases of ``run_id`` against ``baseline``."""
        from sa_core.evals.compare import compare

        after, _ = await _run(runtime, pack.package, run_id)
        before, _ = await _run(runtime, pack.package, baseline)
        result = compare(before.run_id, before.cases, after.cases)
        return EvalComparisonOut(**result.as_dict())
