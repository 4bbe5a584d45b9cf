"""Crash-test worker: build a thread, then rewind it and stop at a point for a SIGKILL.

``python rewind_worker.py DATABASE_URL MODE``: prints ``THREAD <id>``, ``CUT <message id>``
and ``BEFORE <json>`` (the thread as it is before the rewind), then rewinds the thread to the
cut and blocks forever once it reaches ``MODE``: ``inside`` (the rewind's transaction has
written the timeline, files, values and registry, and not committed) or ``committed`` (after
the commit). It prints ``POINT`` there (see ``worker_kill.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from sa_core.engine.timeline import rewind as rewinds
from sa_core.runtime import Runtime  # noqa: E402
from timetravel_kit import Lead, pack  # noqa: E402


async def snapshot(runtime: Runtime, thread_id: str) -> dict[str, Any]:
    """What a rewind changes: the history, files, values and visible registry of a thread."""
    store = runtime.store
    messages, _ = await store.list_messages(thread_id, limit=1000)
    files = await store.find_files(thread_id, "*")
    return {
        "history": [m.id for m in messages],
        "files": {r.path: r.content_hash for r in files},
        "values": await store.list_values(thread_id),
        "registry": [c.reference for c in await store.list_children(thread_id)],
    }


async def hang(*_args: Any, **_kwargs: Any) -> Any:
    print("POINT", flush=True)
    await asyncio.Event().wait()


async def main(url: str, mode: str) -> None:
    lead = Lead()
    async with Runtime(
        packs=[pack()], providers={"test": lead.provider}, database_url=url, load_entrypoints=False
    ) as runtime:
        thread = await runtime.create_thread("lead")
        await thread.set_value("created", True)
        for text in ("write /a.txt one", "set colour blue"):
            await thread.send_message(text)
        cut = (await thread.get_messages(order="desc", limit=1)).messages[0].id
        for text in ("write /a.txt two", "write /b.txt b", "set colour red", "ask late"):
            await thread.send_message(text)
        print(f"THREAD {thread.thread_id}", flush=True)
        print(f"CUT {cut}", flush=True)
        print(f"BEFORE {json.dumps(await snapshot(runtime, thread.thread_id))}", flush=True)
        store = runtime.store
        if mode == "inside":
            store.cancel_after = hang  # type: ignore[method-assign]  # the last write of the rewind
        else:
            rewinds._settle_in_process = hang  # type: ignore[assignment]
        await thread.rewind(to=cut)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
