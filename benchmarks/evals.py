"""Evals: trials per second offline at 1, 8 and 32 concurrent trials; memory over 3,000 trials.

Run: ``python benchmarks/evals.py [--short]``. The suite is one case of the test kit's shop pack
(``tests/evals_kit``): a desk agent that looks an order up, asks a blocking ``checker`` subagent
(a two-sided ``dual_ai`` child) and issues a refund that writes a file; 7 model calls and 3 tool
calls per trial, answered offline from the request. Each trial is scored on ``tools``, ``tree``,
``files``, ``final`` and ``no_errors`` from its stored rows.

It prints

- trials per second (wall) at concurrency 1, 8 and 32: the median of rounds, each round a fresh
  runtime and SQLite database (``--short``: fewer trials);
- the process's resident memory after every 300 of 3,000 trials of one run (concurrency 32):
  flat means the last figure within 10 % (or 25 MB) of the one at 600 trials. ``--short``: 600.
  It runs in a child process whose message caches are bounded at 5,000 messages (see
  :data:`CACHED_MESSAGES`); the throughput rounds use the default caches.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from common import parse_args  # noqa: E402

CACHED_MESSAGES = "5000"
"""The engine's and store's message caches are bounded (``STANDARD_AGENTS_CACHED_MESSAGES``,
default 50,000 messages, about 3 KB each): 3,000 trials of 11 messages never reach that bound,
so with it the resident memory would show the caches filling, not what a run keeps. Bounded at
5,000 (read at import), they fill within the first 600 trials and what grows after is the run's."""
MEMORY_PHASE = "--memory-phase"
"""Internal: run only the memory phase (in a child process started with the bounded caches)."""

CASE = {
    "id": "refund",
    "input": "My kettle arrived broken, order 4411",
    "expect": {
        "tools": {
            "match": "in_order",
            "calls": [{"lookup_order": {"order_id": "4411"}}, "checker", "issue_refund"],
        },
        "tree": [{"child": "checker", "count": 1, "tools": {"calls": ["read_policy"]}}],
        "files": {"/refunds/4411.json": {"json_contains": {"status": "issued"}}},
        "final": {"contains": "refund"},
    },
}


def suite(trials: int) -> Any:
    from sa_core.evals import Suite

    return Suite.parse(
        {
            "suite": "bench",
            "target": "shop/desk",
            "trials": trials,
            "scorers": ["no_errors"],
            "cases": [CASE],
        }
    )


def rss_mb() -> float:
    """Resident set size of this process, MB (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 1e6


async def throughput(concurrency: int, trials: int) -> float:
    """Trials per second of one run in a fresh runtime and database."""
    from sa_core import Runtime
    from sa_core.evals import run_suite
    from tests.evals_kit import offline_provider, shop_pack

    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime(
            packs=[shop_pack()],
            providers={"test": offline_provider(max_recorded=50)},
            database_url=f"sqlite:///{tmp}/bench.db",
            load_entrypoints=False,
        ) as rt:
            start = time.perf_counter()
            report = await run_suite(suite(trials), runtime=rt, concurrency=concurrency)
            elapsed = time.perf_counter() - start
    assert report.metrics()["pass_at_1"] == 1.0, report.cases[0].failures[:3]
    return trials / elapsed


async def memory(trials: int, every: int = 300) -> list[tuple[int, float]]:
    """(trials done, RSS MB) after every ``every`` trials of one long run."""
    from sa_core import Runtime
    from sa_core.evals import run_suite
    from tests.evals_kit import offline_provider, shop_pack

    samples: list[tuple[int, float]] = []

    def progress(done: int, _total: int) -> None:
        if done % every == 0:
            samples.append((done, rss_mb()))

    with tempfile.TemporaryDirectory() as tmp:
        async with Runtime(
            packs=[shop_pack()],
            providers={"test": offline_provider(max_recorded=50)},
            database_url=f"sqlite:///{tmp}/bench.db",
            load_entrypoints=False,
        ) as rt:
            report = await run_suite(suite(trials), runtime=rt, concurrency=32, progress=progress)
    assert report.metrics()["pass_at_1"] == 1.0
    return samples


def memory_in_child(short: bool) -> None:
    """Run the memory phase in a child process whose message caches are bounded."""
    import subprocess

    env = {**os.environ, "STANDARD_AGENTS_CACHED_MESSAGES": CACHED_MESSAGES}
    command = [sys.executable, __file__, MEMORY_PHASE, *(["--short"] if short else [])]
    subprocess.run(command, env=env, check=True)


async def memory_phase(short: bool) -> None:
    """Print resident memory every 300 trials of one long run."""
    total = 600 if short else 3000
    samples = await memory(total)
    print(
        f"resident memory over {total} trials (concurrency 32, caches of "
        f"{os.environ.get('STANDARD_AGENTS_CACHED_MESSAGES')} messages):"
    )
    print("  " + ", ".join(f"{done}: {mb:.0f} MB" for done, mb in samples))
    base = dict(samples).get(600, samples[0][1])
    last = samples[-1][1]
    flat = last <= max(base * 1.10, base + 25)
    print(f"  from 600 to {total} trials: {last - base:+.1f} MB -> {'flat' if flat else 'GROWS'}")


async def main() -> None:
    if MEMORY_PHASE in sys.argv:
        sys.argv.remove(MEMORY_PHASE)
        await memory_phase("--short" in sys.argv)
        return
    args = parse_args(__doc__ or "")
    rounds = args.rounds or (2 if args.short else 3)
    per_round = 24 if args.short else 96
    print(f"trials per second, offline ({per_round} trials a round, {rounds} rounds):")
    for concurrency in (1, 8, 32):
        rates = [await throughput(concurrency, per_round) for _ in range(rounds)]
        print(
            f"  concurrency {concurrency:>2}: median {statistics.median(rates):7.1f} trials/s "
            f"(min {min(rates):.1f}, max {max(rates):.1f})"
        )
    sys.stdout.flush()
    memory_in_child(args.short)


if __name__ == "__main__":
    asyncio.run(main())
