"""Forks: what a fork costs as its source's history grows, and what reading a fork costs.

Run: ``python benchmarks/fork.py [--short]``. For sources of 10, 1,000 and 10,000 messages
(each with 100 files and 10 settled children), it prints

- the time of ``thread.fork()`` (median of several forks) and the rows it writes (over every
  table): both must stay flat, the largest time within 2x of the smallest;
- ``get_messages()`` (a page of 100) and one turn (``send_message``, a prompt that includes the
  chat, so the model gets the whole history) on a fork and on an unforked thread of the same
  history, alternated: the fork within 10 % of the unforked thread.

Times are CPU time of this process (a shared machine's other load does not count) and wall
time. ``--short`` stops at 1,000 messages; ``--postgres`` runs on a throwaway PostgreSQL
cluster (``tests/pgcluster.py``).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import parse_args  # noqa: E402

FILES = 100
CHILDREN = 10
FORKS = 7
READS = 41
TURNS = 31


def bench_pack() -> Any:
    from sa_core import Pack, define_agent, define_model, define_prompt

    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    return Pack(
        name="bench",
        agents=[agent],
        prompts=[prompt],
        models=[define_model(name="fast", provider="test", model="bench")],
    )


async def source_thread(runtime: Any, messages: int) -> Any:
    """A thread with ``messages`` stored messages, 100 files and 10 settled children."""
    from sa_core.engine.subagents.creation import new_thread
    from sa_core.spec import Message, SubagentRegistryEntry
    from sa_core.store import now_us

    thread = await runtime.create_thread("chatter")
    store = runtime.store
    batch = []
    for index in range(messages):
        role = "user" if index % 2 == 0 else "assistant"
        batch.append(
            Message(
                id=f"{thread.thread_id}-{index}",
                thread_id=thread.thread_id,
                role=role,
                content=f"message {index} " + "words " * 20,
                created_at=now_us(),
                status=None if role == "user" else "completed",
            )
        )
        if len(batch) == 1000:
            await store.insert_messages(batch)
            batch = []
    await store.insert_messages(batch)
    for index in range(FILES):
        await store.write_file(thread.thread_id, f"/docs/f{index}.txt", b"x" * (index + 1), "text/plain")
    for index in range(CHILDREN):
        child = await new_thread(runtime.kernel, "chatter", parent_id=thread.thread_id)
        entry = SubagentRegistryEntry(
            reference=child.thread_id, name="chatter", status="terminated", created_at=now_us()
        )
        await store.upsert_child(thread.thread_id, entry, new=True)
        await store.update_thread(child.thread_id, terminated=now_us())
    return await thread.refresh()  # the live handle learns the registry written by the store


async def total_rows(store: Any) -> int:
    from sqlalchemy import func, select

    from sa_core.store.tables import metadata

    def op(conn: Any) -> int:
        return sum(
            int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for table in metadata.sorted_tables
        )

    return int(await store.read(op))


def timed(cpu: list[float], wall: list[float]) -> Any:
    class Timer:
        def __enter__(self) -> None:
            self.start, self.cpu = time.perf_counter(), time.process_time()

        def __exit__(self, *exc: object) -> None:
            wall.append((time.perf_counter() - self.start) * 1000)
            cpu.append((time.process_time() - self.cpu) * 1000)

    return Timer()


async def one_size(database: str, messages: int) -> dict[str, Any]:
    from sa_core import Runtime
    from sa_core.testing import TestProvider

    out: dict[str, Any] = {}
    async with Runtime(
        packs=[bench_pack()],
        providers={"test": TestProvider()},
        database_url=database,
        load_entrypoints=False,
    ) as runtime:
        source = await source_thread(runtime, messages)
        plain = await source_thread(runtime, messages)  # never forked: the baseline
        cpu: list[float] = []
        wall: list[float] = []
        rows = []
        forks = []
        for _ in range(FORKS):
            before = await total_rows(runtime.store)
            with timed(cpu, wall):
                fork = await source.fork()
            rows.append(await total_rows(runtime.store) - before)
            forks.append(fork)
        out["fork_cpu"], out["fork_wall"] = statistics.median(cpu), statistics.median(wall)
        out["fork_rows"] = statistics.median(rows)
        fork = forks[0]
        out["reads"] = await alternate(
            [lambda: plain.get_messages(), lambda: fork.get_messages()], READS
        )
        turns = iter(range(10**9))
        out["turns"] = await alternate(
            [
                lambda: plain.send_message(f"turn {next(turns)}"),
                lambda: fork.send_message(f"turn {next(turns)}"),
            ],
            TURNS,
        )
        assert (await fork.get_messages()).total == messages + 2 * (TURNS + 1)
    return out


async def alternate(calls: list[Any], times: int) -> list[tuple[float, float]]:
    """Median (cpu, wall) ms of each call, the calls alternated ``times`` times (first dropped)."""
    cpu: list[list[float]] = [[] for _ in calls]
    wall: list[list[float]] = [[] for _ in calls]
    for round_ in range(times + 1):
        order = range(len(calls)) if round_ % 2 == 0 else reversed(range(len(calls)))
        for index in order:
            c: list[float] = []
            w: list[float] = []
            with timed(c, w):
                await calls[index]()
            if round_:
                cpu[index] += c
                wall[index] += w
    return [(statistics.median(c), statistics.median(w)) for c, w in zip(cpu, wall, strict=True)]


def main() -> None:
    """Print the fork cost per history size and the fork/unforked ratios."""
    args = parse_args(__doc__ or "")
    sizes = [10, 1000] if args.short else [10, 1000, 10000]
    results = {}
    cluster = None
    if args.postgres:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pgcluster import start_cluster

        cluster = start_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for size in sizes:
                if cluster is not None:
                    cluster.run("psql", cluster.url(), "-qc", f"CREATE DATABASE fork{size}")
                    url = cluster.url(f"fork{size}")
                else:
                    url = f"sqlite:///{Path(tmp) / f'fork-{size}.db'}"
                results[size] = asyncio.run(one_size(url, size))
    finally:
        if cluster is not None:
            cluster.stop()
    store = "PostgreSQL (CPU: this process only)" if args.postgres else "SQLite file"
    print(f"fork (source: N messages, {FILES} files, {CHILDREN} children; {store}):")
    for size, r in results.items():
        (plain_read, fork_read), (plain_turn, fork_turn) = r["reads"], r["turns"]
        print(
            f"  N={size:>6}: fork cpu {r['fork_cpu']:.2f} ms, wall {r['fork_wall']:.2f} ms, "
            f"rows written {r['fork_rows']:.0f}"
        )
        print(
            f"            get_messages: unforked cpu {plain_read[0]:.3f} ms, fork "
            f"{fork_read[0]:.3f} ms ({fork_read[0] / plain_read[0]:.2f}x); wall "
            f"{plain_read[1]:.3f} / {fork_read[1]:.3f} ms ({fork_read[1] / plain_read[1]:.2f}x)"
        )
        print(
            f"            one turn:     unforked cpu {plain_turn[0]:.3f} ms, fork "
            f"{fork_turn[0]:.3f} ms ({fork_turn[0] / plain_turn[0]:.2f}x); wall "
            f"{plain_turn[1]:.3f} / {fork_turn[1]:.3f} ms ({fork_turn[1] / plain_turn[1]:.2f}x)"
        )
    cpus = [r["fork_cpu"] for r in results.values()]
    rows = [r["fork_rows"] for r in results.values()]
    print(
        f"  fork time largest/smallest: {max(cpus) / min(cpus):.2f}x (target <= 2x); rows "
        f"written {min(rows):.0f}..{max(rows):.0f} (flat)"
    )


if __name__ == "__main__":
    main()
