"""A runtime on a SQLite file killed while a blocking parent waits on a child's approval.

Run as ``python tests/approval_worker.py DATABASE LEDGER``: it creates a thread of the ``lead``
agent of :func:`tests.test_approvals.delegating_pack`, sends the message that makes it call its
blocking ``payer`` subagent, prints ``THREAD <id>``, and once the child's ``transfer`` call awaits
approval (the parent's registry entry says so) prints ``POINT`` and blocks forever, so that the
test kills it with SIGKILL there. Every ``transfer`` run appends a JSON line to LEDGER.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sa_core import Runtime  # noqa: E402
from tests.test_approvals import delegating_model, delegating_pack  # noqa: E402


class Ledger(list[Any]):
    """A list of tool runs that also appends each run to a file (visible across processes)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def append(self, item: Any) -> None:
        super().append(item)
        with self.path.open("a") as handle:
            handle.write(json.dumps(item) + "\n")


async def main(database: str, ledger: str) -> None:
    runtime = Runtime(
        packs=[delegating_pack(Ledger(Path(ledger)))],
        providers={"test": delegating_model()},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    )
    await runtime.start()
    lead = await runtime.create_thread("lead")
    print(f"THREAD {lead.thread_id}", flush=True)
    await lead.send_message("pay cy", wait=False)
    while True:
        await asyncio.sleep(0.01)
        await lead.refresh()
        if lead.children and lead.children[0].status == "awaiting_approval":
            break
    print("POINT", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
