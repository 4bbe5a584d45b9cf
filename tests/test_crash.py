"""The crash test, short version: SIGKILL ``sa serve`` under load and count the damage.

This is the acceptance test of the durable engine (issue 9): every count must be zero. One run
kills a single server on SQLite 15 times, one kills two workers sharing PostgreSQL (issue 10).
The full runs are ``python benchmarks/crash.py --kills 100`` and ``--workers 3 --kills 30``;
both print the seed, and ``--seed`` replays the same job kinds and kill delays.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from crashpack.counting import MUST_BE_ZERO, Report, killed_in_each_run
from crashpack.harness import Pending, Settings, run

KILLS = 15
SEED = int(os.environ.get("SA_CRASH_SEED", "915"))


def test_sigkill_under_load_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    settings = Settings(
        kills=KILLS,
        seed=SEED,
        workdir=tmp_path,
        clients=3,
        min_delay=0.1,
        max_delay=0.6,
        settle_timeout=45.0,
    )
    report = asyncio.run(run(settings))
    print(report.format())
    assert report.kills == KILLS
    assert report.acked > KILLS, "the clients got too few messages through to test anything"
    assert report.info["tool_executions"] > 0 and report.info["child_threads"] > 0
    assert report.settled, f"seed {SEED}: the last server never settled\n{report.format()}"
    nonzero = {name: report.counts[name] for name in MUST_BE_ZERO if report.counts[name]}
    assert not nonzero, f"seed {SEED}: {nonzero}\n{report.format()}"


def test_a_run_that_did_not_settle_says_so_with_what_was_still_owed() -> None:
    pending = Pending(owed=["k0.1~tool"], queue=0, effects=2, executions=1)
    report = Report(seed=1, settled=False, unsettled=pending.describe())
    text = report.format()
    assert "settled=False" in text
    assert "NOT SETTLED" in text
    assert "1 acknowledged jobs unanswered, 0 queue entries, 2 effects pending or running, " in text
    assert Report(seed=1, settled=True).format().count("NOT SETTLED") == 0


def test_a_given_up_effect_needs_a_kill_for_each_of_its_two_runs() -> None:
    assert killed_in_each_run([10, 20], [15, 25], since_us=5)
    assert not killed_in_each_run([10, 20], [25], since_us=5)  # the first run was not cut off
    assert not killed_in_each_run([10], [15], since_us=5)  # one run: never given up after one


def test_a_run_killed_before_its_first_line_needs_a_kill_of_its_own() -> None:
    # the ledger saw one run; the other was killed between its committed start and its body
    assert killed_in_each_run([10], [8, 15], since_us=5)
    assert killed_in_each_run([10], [15, 30], since_us=5)
    assert not killed_in_each_run([10], [3, 15], since_us=5)  # a kill before it was scheduled
    assert not killed_in_each_run([], [8], since_us=5)


WORKER_KILLS = 3


def test_sigkill_of_workers_on_one_postgres_loses_nothing_and_repeats_nothing(
    tmp_path: Path, pg_database_url: str
) -> None:
    """The same count with two ``sa serve`` workers: each kill hits one running turns."""
    settings = Settings(
        kills=WORKER_KILLS,
        seed=SEED,
        workdir=tmp_path,
        clients=3,
        min_delay=0.1,
        max_delay=0.6,
        settle_timeout=30.0,
        workers=2,
        database_url=pg_database_url,
    )
    report = asyncio.run(run(settings))
    print(report.format())
    assert report.kills == WORKER_KILLS
    assert report.lease_holder_kills > 0, "no kill hit a worker running a turn"
    assert report.acked > WORKER_KILLS, "the clients got too few messages through"
    assert report.info["tool_executions"] > 0 and report.info["child_threads"] > 0
    assert report.settled, f"seed {SEED}: the workers never settled\n{report.format()}"
    nonzero = {name: report.counts[name] for name in MUST_BE_ZERO if report.counts[name]}
    assert not nonzero, f"seed {SEED}: {nonzero}\n{report.format()}"
