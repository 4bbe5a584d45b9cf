"""A runtime on a SQLite file that stops dead inside a compaction step, for the crash tests.

Run as ``python tests/compaction_worker.py MODE DATABASE``. ``first``: creates a thread, has
three turns answered, sends a fourth message (whose request would exceed the trigger) without
waiting, and prints ``THREAD <id>``; the summarizer then prints ``POINT`` and blocks forever, so
the test can SIGKILL the process in the middle of the compaction. ``again``: only starts a
runtime on the database (which resumes the owed turn) and blocks in the summarizer once more.

The test reopens the database in-process with :func:`build_pack` and :func:`provider` (nothing
blocks there) and checks the compaction was redone exactly once.
"""

from __future__ import annotations

import asyncio
import sys

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
from sa_core.engine.model.compaction_summary import SUMMARY_INSTRUCTIONS
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

PAD = "x" * 396
TURNS = 4


def build_pack() -> Pack:
    """A chat agent that compacts once its requests pass 510 estimated tokens."""
    model = define_model(name="m", provider="test", model="m")
    prompt = define_prompt(
        name="main",
        model="m",
        prompt="You help.",
        include_chat=True,
        compaction={"trigger_tokens": 510, "keep_last": 4},
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    return Pack(name="crashy", agents=[agent], prompts=[prompt], models=[model])


def provider(*, block: bool = False) -> FunctionProvider:
    """Answers ``uN: ...`` with ``aN: ...``; the summarizer blocks forever when ``block``."""

    async def answer(request: ProviderRequest) -> str:
        if request.messages[0].content == SUMMARY_INSTRUCTIONS:
            if block:
                print("POINT", flush=True)
                await asyncio.Event().wait()
            return "THE SUMMARY"
        turn = (request.messages[-1].content or "").split(":")[0][1:]
        return f"a{turn}: {PAD}"

    return FunctionProvider(answer)


async def main(mode: str, database: str) -> None:
    runtime = Runtime(
        packs=[build_pack()],
        providers={"test": provider(block=True)},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    )
    await runtime.start()
    if mode == "first":
        thread = await runtime.create_thread("helper")
        print(f"THREAD {thread.thread_id}", flush=True)
        for n in range(1, TURNS):
            await thread.send_message(f"u{n}: {PAD}")
        await thread.send_message(f"u{TURNS}: {PAD}", wait=False)
    else:
        print("THREAD resumed", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
