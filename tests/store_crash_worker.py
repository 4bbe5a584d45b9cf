"""A runtime whose tool writes to the pack store and then stops dead, for the crash test.

Run as ``python tests/store_crash_worker.py DATABASE``: it creates a thread of ``helper``, sends
a message whose answer calls the ``note`` tool, and prints ``THREAD <id>``. The tool puts an
item and, on its first run, prints ``POINT`` and blocks forever, so that the test kills the
process with SIGKILL right after the put. :func:`build_pack` and :func:`provider` serve the
restart the test then runs in-process (nothing blocks there).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from echo_agent import echo_pack  # noqa: E402

from sa_core import Pack, Runtime, define_prompt, define_tool  # noqa: E402
from sa_core.testing import FunctionProvider  # noqa: E402


def build_pack(*, block: bool) -> Pack:
    """The echo pack with ``note``, which puts ``{"attempt": n}`` and may block after it."""

    async def note(state: Any, args: dict[str, Any]) -> str:
        await state.store.put(("notes",), "k", {"attempt": state.tool_attempt})
        if block and state.tool_attempt == 1:
            print("POINT", flush=True)
            await asyncio.Event().wait()
        return f"noted on attempt {state.tool_attempt}"

    pack = echo_pack()
    pack.tools = [define_tool(name="note", args={"type": "object"}, execute=note)]
    pack.prompts = [
        define_prompt(name="main", model="m", prompt="Echo.", include_chat=True, tools=["note"])
    ]
    return pack


def provider() -> FunctionProvider:
    """Calls ``note`` for the user's message, then answers ``done``."""

    def answer(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return {"tool_calls": [{"id": "call_note", "name": "note", "arguments": {}}]}

    return FunctionProvider(answer)


async def main(database: str) -> None:
    async with Runtime(
        packs=[build_pack(block=True)],
        providers={"test": provider()},
        database_url=database,
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("helper")
        print(f"THREAD {thread.thread_id}", flush=True)
        await thread.send_message("note it", wait=False)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
