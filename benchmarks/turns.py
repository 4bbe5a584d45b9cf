"""Per-turn cost: 1,000 conversations x 3 turns, every message durably written (SQLite file).

Run: ``python benchmarks/turns.py [--short]``. Each conversation is a fresh thread of a one-sided
agent whose prompt includes the chat; the offline TestProvider answers at once, so the figure is
the engine's and the store's own cost per turn (store the user message, build the context, call
the model, store the answer with its log row, settle the turn). Target: <= 1.2 ms per turn.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import parse_args, summary  # noqa: E402

TURNS = 3


async def one_round(database: Path, conversations: int) -> tuple[float, float, float]:
    """(wall ms per turn, CPU ms per turn, ms per create_thread) over one fresh runtime."""
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.testing import TestProvider

    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="bench")
    pack = Pack(name="bench", agents=[agent], prompts=[prompt], models=[model])
    provider = TestProvider()
    url = f"sqlite:///{database}"
    turn_wall = turn_cpu = create = 0.0
    async with Runtime(
        packs=[pack], providers={"test": provider}, database_url=url, load_entrypoints=False
    ) as runtime:
        for _ in range(conversations):
            start = time.perf_counter()
            thread = await runtime.create_thread("chatter")
            create += time.perf_counter() - start
            start, cpu_start = time.perf_counter(), time.process_time()
            for turn in range(TURNS):
                await thread.send_message(f"message {turn}")
            turn_wall += time.perf_counter() - start
            turn_cpu += time.process_time() - cpu_start
        assert provider.call_count == conversations * TURNS, provider.call_count
    turns = conversations * TURNS
    return turn_wall / turns * 1000, turn_cpu / turns * 1000, create / conversations * 1000


def main() -> None:
    """Print the per-turn figures."""
    args = parse_args(__doc__ or "")
    conversations = 100 if args.short else 1000
    rounds = args.rounds or (1 if args.short else 3)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            results.append(asyncio.run(one_round(Path(tmp) / f"turns-{index}.db", conversations)))
    print(f"turns ({conversations} conversations x {TURNS} turns, TestProvider, SQLite file, WAL):")
    print(f"  wall per turn:   {summary([r[0] for r in results])}; target <= 1.2 ms")
    print(f"  cpu per turn:    {summary([r[1] for r in results])}")
    print(f"  create_thread:   {summary([r[2] for r in results])}")


if __name__ == "__main__":
    main()
