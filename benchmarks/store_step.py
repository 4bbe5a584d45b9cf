"""The thread store under one engine step: what a step's writes and reads cost.

Run: ``python benchmarks/store_step.py [--short] [--rounds N]``. On a new SQLite file in WAL
mode, through each SQLite backend (the default raw driver, and ``sqlite+aiosqlite`` when
greenlet is installed), it times:

* ``step tx``: one transaction inserting a pending assistant message, completing it and writing
  a model log (what a model step commits), median and p90 over the calls;
* ``update_thread``: the execution state written after a step;
* ``history(since)``: the read of the messages newer than a point, with nothing new.

Each figure is the median of ``--rounds`` rounds (default 3; ``--short``: 1 round, fewer calls),
each on a new database after 20 warm-up steps.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import parse_args  # noqa: E402

from sa_core.spec.records import Log, Message  # noqa: E402
from sa_core.store import Store, ThreadRow, now_us, open_store  # noqa: E402

WARM_UP = 20


async def step(store: Store, i: int) -> None:
    """One model step's writes: a pending message completed, and its log, in one transaction."""
    pending = Message(
        id=f"m{i}", thread_id="t1", role="assistant", content="x" * 200, status="pending"
    )
    async with store.transaction() as tx:
        await store.insert_messages([pending], tx=tx)
        await store.update_message(
            f"m{i}", {"status": "completed", "response_completed_at": now_us()}, tx=tx
        )
        log = Log(id=f"l{i}", type="model", data={"t": 1}, created_at=now_us())
        await store.insert_log("t1", log, tx=tx)


async def one_round(url: str, count: int) -> dict[str, float]:
    """Microseconds per call of each measured operation, on a new store."""
    store = await open_store(url)
    try:
        await store.create_thread(ThreadRow(id="t1", package="pkg", agent_id="agent"))
        for i in range(WARM_UP):
            await step(store, i)
        samples = []
        for i in range(WARM_UP, WARM_UP + count):
            started = time.perf_counter()
            await step(store, i)
            samples.append(time.perf_counter() - started)
        samples.sort()
        started = time.perf_counter()
        for i in range(count):
            await store.update_thread("t1", execution={"step": i})
        update = (time.perf_counter() - started) / count
        since = now_us()
        started = time.perf_counter()
        for _ in range(count):
            await store.history("t1", since=since)
        history = (time.perf_counter() - started) / count
    finally:
        await store.close()
    return {
        "step tx (median)": samples[len(samples) // 2] * 1e6,
        "step tx (p90)": samples[len(samples) * 9 // 10] * 1e6,
        "update_thread": update * 1e6,
        "history(since), nothing new": history * 1e6,
    }


def backends() -> list[str]:
    """The SQLite backends this environment can run (aiosqlite needs greenlet)."""
    return ["sqlite", "sqlite+aiosqlite"] if importlib.util.find_spec("greenlet") else ["sqlite"]


def main() -> None:
    """Print microseconds per call, per backend."""
    args = parse_args(__doc__ or "")
    rounds = args.rounds or (1 if args.short else 3)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in backends():
            count = 300 if kind == "sqlite" else 60
            count = count // 3 if args.short else count
            figures: dict[str, list[float]] = {}
            for index in range(rounds):
                url = f"{kind}:///{Path(tmp) / f'{kind}-{index}.db'}"
                for name, value in asyncio.run(one_round(url, count)).items():
                    figures.setdefault(name, []).append(value)
            print(f"{kind} ({count} calls each, median of {rounds} rounds):")
            for name, values in figures.items():
                print(f"  {name:30} {statistics.median(values):8.0f} us")


if __name__ == "__main__":
    main()
