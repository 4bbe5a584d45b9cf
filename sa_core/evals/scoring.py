"""Scoring one trial from its stored tree: expectations, then the suite's and case's scorers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from sa_core.evals.expectations import case_verdict, score_expectations
from sa_core.evals.results import TrialResult
from sa_core.evals.scorers import Score, Scorer, resolve_scorer
from sa_core.evals.view import load_view

if TYPE_CHECKING:
    from sa_core.evals.judge import Judge
    from sa_core.evals.suite import Case, Suite
    from sa_core.runtime import Runtime


class _Scoring(Protocol):
    """What scoring needs of a run: the runtime, the suite and the judge."""

    @property
    def runtime(self) -> Runtime: ...

    @property
    def suite(self) -> Suite: ...

    @property
    def judge(self) -> Judge | None: ...


async def score_trial(
    context: _Scoring,
    case: Case,
    index: int,
    thread_id: str | None,
    error: str | None,
    extra: Sequence[Scorer] = (),
) -> TrialResult:
    """Read the trial's tree and score it; a trial without a thread fails with its error."""
    if thread_id is None:
        failed = Score(passed=False, name="error", reason=error or "the trial did not start")
        return TrialResult(case.id, index, None, False, 0.0, [failed], status="failed", error=error)
    view = await load_view(context.runtime, thread_id, case_id=case.id, trial=index, error=error)
    key = f"eval-judge:{context.suite.suite}/{case.id}/{index}"
    scores = await score_expectations(case, view, context.judge, key)
    specs = [*context.suite.scorers, *case.scorers]
    for scorer in [*(resolve_scorer(s) for s in specs), *extra]:
        try:
            scores.append(await scorer(view))
        except Exception as exc:  # a broken scorer fails its own score, not the run
            scores.append(
                Score(
                    passed=False,
                    name=scorer.name,
                    reason=f"scorer raised {type(exc).__name__}: {exc}",
                )
            )
    if error is not None:
        scores.insert(0, Score(passed=False, name="error", reason=error, required=True))
    passed, value = case_verdict(case, scores)
    return TrialResult(
        case_id=case.id,
        trial=index,
        thread_id=thread_id,
        passed=passed,
        score=round(value, 6),
        scores=scores,
        cost_usd=view.cost_usd,
        tokens=view.usage.total_tokens,
        model_calls=view.usage.model_calls,
        latency_s=view.latency_s,
        status=view.status,
        outcome=view.outcome,
        error=error,
        tree=[
            {
                "path": child.path,
                "agent": child.agent,
                "thread_id": child.thread_id,
                "mode": child.mode,
                "status": child.status,
                "calls": [
                    {"name": c.name, "arguments": c.arguments, "ok": c.ok} for c in child.tool_calls
                ],
            }
            for child in view.children
        ],
    )
