"""A schedule on three workers sharing PostgreSQL: one run per period, whoever dies.

Three worker processes (``schedule_worker.py``) run schedule ``minutely`` (``every="1m"``) by
one clock, a file the test rewrites. The test moves the clock a minute at a time and, at one
period, kills with SIGKILL the worker that claimed that period's run while its tool is running.
Every period still gets exactly one run (one thread carrying that period's time), and the run
the dead worker had started is finished by another worker once its lease expires.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sa_core.store import open_store

WORKER = Path(__file__).with_name("schedule_worker.py")
START = int(datetime(2030, 1, 4, 8, 0, 30, tzinfo=UTC).timestamp() * 1_000_000)
MINUTE = 60_000_000
PERIODS = 6
KILL_AT = 3
"""The period whose run's worker is killed."""


class Workers:
    """The worker processes of the test and the files they share."""

    def __init__(self, tmp: Path, database: str) -> None:
        self.clock = tmp / "clock"
        self.ledger = tmp / "ledger.jsonl"
        self.database = database
        self.procs: list[subprocess.Popen[str]] = []
        self.set_clock(START)
        self.ledger.touch()

    def set_clock(self, at_us: int) -> None:
        partial = self.clock.with_suffix(".tmp")
        partial.write_text(str(at_us))
        partial.replace(self.clock)  # every reader sees the old time or the new one

    def start(self, count: int) -> None:
        env = {**os.environ, "SA_LEASE_SECONDS": "1", "SA_TEST_WORK_SECONDS": "1.5"}
        for _ in range(count):
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), self.database, str(self.clock), str(self.ledger)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            self.procs.append(proc)
        for proc in self.procs[-count:]:  # each one READY before the test goes on
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "READY":
                proc.kill()
                raise AssertionError(f"a worker did not start: {line}{proc.communicate()[1]}")

    def lines(self) -> list[dict[str, Any]]:
        text = self.ledger.read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def stop(self) -> None:
        """Kill every worker (SIGKILL: nothing is given back)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self.procs.clear()


@pytest.fixture
def workers(tmp_path: Path, pg_database_url: str) -> Iterator[Workers]:
    started = Workers(tmp_path, pg_database_url)
    try:
        yield started
    finally:
        started.stop()


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def runs_by_period(database: str) -> dict[int, list[tuple[str, bool]]]:
    """Scheduled time -> ``[(thread id, answered)]`` of every thread the schedule started."""
    async with await open_store(database) as store:
        rows, _ = await store.list_threads(tag="schedule:minutely", limit=500)
        found: dict[int, list[tuple[str, bool]]] = {}
        for row in rows:
            messages, _ = await store.list_messages(row.id, limit=100)
            if not messages:  # its queued message is not taken in yet
                continue
            first = messages[0]
            answered = any(m.role == "assistant" and m.content == "done" for m in messages)
            found.setdefault(first.metadata["scheduled_for"], []).append((row.id, answered))
        return found


def test_a_schedule_runs_once_a_period_on_three_workers_and_survives_its_worker_s_kill(
    workers: Workers,
) -> None:
    workers.start(3)
    victim = None
    for period in range(1, PERIODS + 1):
        workers.set_clock(START + period * MINUTE)
        due = START + period * MINUTE  # every minute from the schedule's start

        def started(due: int = due) -> list[str]:
            runs = asyncio.run(runs_by_period(workers.database)).get(due, [])
            ids = {thread_id for thread_id, _ in runs}
            return [line for line in workers.lines() if line["thread"] in ids]

        lines = wait_for(started, f"the run of period {period} to start its tool")
        if period == KILL_AT:
            victim = next(p for p in workers.procs if p.pid == lines[0]["pid"])
            killed_thread = lines[0]["thread"]
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=30)

    def all_answered(count: int = PERIODS) -> dict[int, list[tuple[str, bool]]] | None:
        runs = asyncio.run(runs_by_period(workers.database))
        done = len(runs) == count and all(answered for r in runs.values() for _, answered in r)
        return runs if done else None

    runs = wait_for(all_answered, "every run to be answered")
    expected = [START + period * MINUTE for period in range(1, PERIODS + 1)]
    assert sorted(runs) == expected
    assert all(len(threads) == 1 for threads in runs.values()), runs  # exactly once each

    assert victim is not None and victim.returncode == -signal.SIGKILL
    lines = [line for line in workers.lines() if line["thread"] == killed_thread]
    assert [(line["kind"], line["pid"]) for line in lines[:1]] == [("start", victim.pid)]
    ends = [line for line in lines if line["kind"] == "end"]
    assert len(ends) == 1 and ends[0]["pid"] != victim.pid  # finished by a survivor
    assert ends[0]["attempt"] == 2  # the interrupted tool ran once more, not twice more
    assert len({line["pid"] for line in workers.lines()}) >= 2

    # every worker dies; five runs fall due while none runs; two new workers start
    workers.stop()
    workers.set_clock(START + (PERIODS + 5) * MINUTE + 10_000_000)
    workers.start(2)
    runs = wait_for(lambda: all_answered(PERIODS + 1), "the missed runs to run once")
    assert sorted(runs)[-1] == START + (PERIODS + 1) * MINUTE  # the first one missed, once
    assert all(len(threads) == 1 for threads in runs.values()), runs

    async def next_run() -> int | None:
        async with await open_store(workers.database) as store:
            (record,) = await store.list_schedules("timed")
            return record.next_run_at

    assert asyncio.run(next_run()) == START + (PERIODS + 6) * MINUTE
