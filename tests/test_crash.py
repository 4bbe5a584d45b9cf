"""The crash test, short version: SIGKILL ``sa serve`` 15 times under load and count the damage.

This is the acceptance test of the durable engine (issue 9): every count must be zero. The full
run is ``python benchmarks/crash.py --kills 100``; both print the seed, and ``--seed`` replays
the same job kinds and kill delays.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from crashpack.harness import MUST_BE_ZERO, Settings, run

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
