"""Long threads: the cost of a thread's 10th turn against its 600th.

Run: ``python benchmarks/long_thread.py [--short]``. One thread of a one-sided agent whose prompt
includes the chat; each turn stores a user message and an answer, so turn N sees 2N - 1 stored
messages. The figure for turn N is the median of the turns in a small window around N (single
turns are too noisy on a busy machine). Target: the 600th turn costs <= 1.5x the 10th.
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


async def one_round(database: Path, last: int) -> list[float]:
    """Wall ms of every turn 1..last of one thread."""
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.testing import TestProvider

    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="bench")
    pack = Pack(name="bench", agents=[agent], prompts=[prompt], models=[model])
    provider = TestProvider()
    times = []
    async with Runtime(
        packs=[pack],
        providers={"test": provider},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("chatter")
        for turn in range(1, last + WINDOW + 1):
            start = time.perf_counter()
            await thread.send_message(f"message {turn}")
            times.append((time.perf_counter() - start) * 1000)
        assert len(provider.last_request.messages) == 2 * (last + WINDOW), "history missing"
    return times


def around(times: list[float], turn: int) -> float:
    """Median wall ms of the turns ``turn - WINDOW .. turn + WINDOW`` (1-based)."""
    return statistics.median(times[max(0, turn - 1 - WINDOW) : turn + WINDOW])


def main() -> None:
    """Print the cost of the 10th and the last turn, and their ratio."""
    args = parse_args(__doc__ or "")
    last = 200 if args.short else 600
    rounds = args.rounds or (1 if args.short else 3)
    early, late = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            times = asyncio.run(one_round(Path(tmp) / f"long-{index}.db", last))
            early.append(around(times, 10))
            late.append(around(times, last))
    ten, final = statistics.median(early), statistics.median(late)
    print(f"long thread (one thread, {last} turns, TestProvider, SQLite file; {rounds} rounds):")
    print(f"  turn 10:  median {ten:.3f} ms")
    print(f"  turn {last}: median {final:.3f} ms")
    print(f"  ratio:    {final / ten:.2f}x; target <= 1.5x")


if __name__ == "__main__":
    main()
