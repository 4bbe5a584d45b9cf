"""A worker on a shared PostgreSQL database whose schedules run by a clock the test moves.

Run as ``python tests/schedule_worker.py DATABASE CLOCK_FILE LEDGER``. It starts a runtime with
pack ``timed``: schedule ``minutely`` (``every="1m"``) sends ``tick`` to agent ``ticker``, whose
model calls the ``work`` tool once and then answers ``done``. The tool appends a ``start`` line
to LEDGER, sleeps ``$SA_TEST_WORK_SECONDS`` (default 0.2) and appends an ``end`` line; each line
is ``{"kind", "thread", "pid", "attempt"}``. The worker prints ``READY`` once started and runs
until killed.

The clock (:class:`FileClock`) reads the time, in microseconds since the epoch, from
CLOCK_FILE, which the test rewrites to move every worker's clock at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sa_core import (
    Pack,
    Runtime,
    define_agent,
    define_model,
    define_prompt,
    define_schedule,
    define_tool,
)
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

POLL_SECONDS = 0.05


class FileClock:
    """A clock every process reads from one file (µs since the epoch)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def now_us(self) -> int:
        return int(self.path.read_text().strip())

    def wait_seconds(self, until_us: int) -> float:
        return 0.0 if until_us <= self.now_us() else POLL_SECONDS  # read the file again soon

    def on_change(self, callback: Callable[[], None]) -> None:
        """The file says when it moved: nothing to call."""


def ledger_line(path: Path, kind: str, state: Any) -> None:
    line = {
        "kind": kind,
        "thread": state.thread_id,
        "pid": os.getpid(),
        "attempt": state.tool_attempt,
    }
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def build_pack(ledger: Path) -> Pack:
    async def work(state: Any, args: Any) -> str:
        ledger_line(ledger, "start", state)
        await asyncio.sleep(float(os.environ.get("SA_TEST_WORK_SECONDS", "0.2")))
        ledger_line(ledger, "end", state)
        return "worked"

    return Pack(
        name="timed",
        agents=[define_agent(name="ticker", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="m", prompt="Work.", tools=["work"])],
        models=[define_model(name="m", provider="test", model="x")],
        tools=[define_tool(name="work", description="Work.", execute=work)],
        schedules=[define_schedule(name="minutely", agent="ticker", every="1m", message="tick")],
    )


def brain(request: ProviderRequest) -> Any:
    if request.messages[-1].role == "tool":
        return "done"
    return {"tool_calls": [{"name": "work", "arguments": {}}]}


async def main(database: str, clock_file: str, ledger: str) -> None:
    async with Runtime(
        packs=[build_pack(Path(ledger))],
        providers={"test": FunctionProvider(brain)},
        database_url=database,
        load_entrypoints=False,
        clock=FileClock(Path(clock_file)),
    ):
        print("READY", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
