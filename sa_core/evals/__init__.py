"""Evals: know whether an agent is good, from a suite file, a stored thread or a simulated user.

::

    from sa_core.evals import Suite, run_suite, load_run, scorer, Score

    report = await run_suite(Suite.load("evals/suite.yaml"), runtime=rt, trials=3,
                             concurrency=8, cache="replay-or-record")
    report.print()
    report.write("run.json")
    assert report.gate("pass_at_1>=0.9,regressions=0")

Every trial is an ordinary thread (tagged ``eval``), scored from its stored rows; runs are stored
(``sa eval list``) and can be scored again without running the agent
(``await load_run(rt, run_id).rescore([...])``). See docs/evals.md.
"""

from __future__ import annotations

from sa_core.evals.cache import CacheMissError
from sa_core.evals.report import GateResult, Report
from sa_core.evals.results import TrialResult
from sa_core.evals.runner import run_suite
from sa_core.evals.scorers import Score, Scorer, scorer
from sa_core.evals.stats import pass_at_k, pass_hat_k
from sa_core.evals.storedrun import RunNotFoundError, StoredRun, load_run
from sa_core.evals.suite import Case, Suite, SuiteError
from sa_core.evals.view import TrialView

__all__ = [
    "CacheMissError",
    "Case",
    "GateResult",
    "Report",
    "RunNotFoundError",
    "Score",
    "Scorer",
    "StoredRun",
    "Suite",
    "SuiteError",
    "TrialResult",
    "TrialView",
    "load_run",
    "pass_at_k",
    "pass_hat_k",
    "run_suite",
    "scorer",
]
