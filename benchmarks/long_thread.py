"""Long threads: the cost of a thread's 10th turn against its 600th.

Run: ``python benchmarks/long_thread.py [--short]``. One thread of a one-sided agent whose prompt
includes the chat; each turn stores a user message and an answer, so turn N sees 2N - 1 stored
messages. The figure for turn N is the median of the turns in a small window around N (single
turns are too noisy on a busy machine), in CPU time (this process's own work, so other load on
a shared machine does not count) and in wall time. Target: the 600th turn costs <= 1.5x the 10th.

``--postgres`` runs the same on a throwaway PostgreSQL cluster (``tests/pgcluster.py``); its CPU
figure is this process's only, the database's work shows in the wall time.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import parse_args  # noqa: E402

WINDOW = 5


async def one_round(database: str, last: int) -> tuple[list[float], list[float]]:
    """(CPU ms, wall ms) of every turn 1..last + WINDOW of one thread."""
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.testing import TestProvider

    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="bench")
    pack = Pack(name="bench", agents=[agent], prompts=[prompt], models=[model])
    provider = TestProvider()
    times: list[float] = []
    cpu: list[float] = []
    async with Runtime(
        packs=[pack],
        providers={"test": provider},
        database_url=database,
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("chatter")
        for turn in range(1, last + WINDOW + 1):
            start, cpu_start = time.perf_counter(), time.process_time()
            await thread.send_message(f"message {turn}")
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - cpu_start) * 1000)
        assert len(provider.last_request.messages) == 2 * (last + WINDOW), "history missing"
    return cpu, times


def around(times: list[float], turn: int) -> float:
    """Median wall ms of the turns ``turn - WINDOW .. turn + WINDOW`` (1-based)."""
    return statistics.median(times[max(0, turn - 1 - WINDOW) : turn + WINDOW])


def main() -> None:
    """Print the cost of the 10th and the last turn, and their ratio."""
    args = parse_args(__doc__ or "")
    last = 200 if args.short else 600
    rounds = args.rounds or (1 if args.short else 3)
    early, late, early_wall, late_wall = [], [], [], []
    cluster = None
    if args.postgres:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pgcluster import start_cluster

        cluster = start_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for index in range(rounds):
                if cluster is not None:
                    cluster.run("psql", cluster.url(), "-qc", f"CREATE DATABASE long{index}")
                    url = cluster.url(f"long{index}")
                else:
                    url = f"sqlite:///{Path(tmp) / f'long-{index}.db'}"
                cpu, wall = asyncio.run(one_round(url, last))
                early.append(around(cpu, 10))
                late.append(around(cpu, last))
                early_wall.append(around(wall, 10))
                late_wall.append(around(wall, last))
    finally:
        if cluster is not None:
            cluster.stop()
    ten, final = statistics.median(early), statistics.median(late)
    ten_wall, final_wall = statistics.median(early_wall), statistics.median(late_wall)
    store = "PostgreSQL (CPU: this process only)" if args.postgres else "SQLite file"
    print(f"long thread (one thread, {last} turns, TestProvider, {store}; {rounds} rounds):")
    print(f"  turn 10:  cpu {ten:.3f} ms, wall {ten_wall:.3f} ms")
    print(f"  turn {last}: cpu {final:.3f} ms, wall {final_wall:.3f} ms")
    print(f"  ratio:    cpu {final / ten:.2f}x, wall {final_wall / ten_wall:.2f}x; target <= 1.5x")


if __name__ == "__main__":
    main()
