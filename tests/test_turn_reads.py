"""What a turn reads again before it runs, and that skipping a read never serves a stale row.

A live thread whose row and registry were read (or written) by this runtime, with nothing
committed by another connection since, starts its next turn without reading them again in the
transaction that acknowledges the message. A commit from another connection (another process,
another store on the file) makes that transaction read them again, so the runner sees it.
These tests count the reads (a structural property, never a timing).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from echo_agent import echo_pack

from sa_core import Runtime
from sa_core.store import open_store
from sa_core.testing import FunctionProvider


def count_row_reads(runtime: Runtime) -> Counter[str]:
    """Count the store's thread row and registry reads from now on (both at once count once each)."""
    store: Any = runtime.store
    counts: Counter[str] = Counter()
    get_thread, list_children = store.get_thread, store.list_children

    async def counted_get_thread(*args: Any, **kwargs: Any) -> Any:
        counts["row"] += 1
        return await get_thread(*args, **kwargs)

    async def counted_list_children(*args: Any, **kwargs: Any) -> Any:
        counts["registry"] += 1
        return await list_children(*args, **kwargs)

    with_children = store.get_thread_with_children

    async def counted_with_children(*args: Any, **kwargs: Any) -> Any:
        counts["row"] += 1
        counts["registry"] += 1
        return await with_children(*args, **kwargs)

    store.get_thread, store.list_children = counted_get_thread, counted_list_children
    store.get_thread_with_children = counted_with_children
    return counts


def runtime_on(url: str, seen: list[str]) -> Runtime:
    def answer(request: Any) -> str:
        seen.append(str(request.messages[-1].content))
        return "ok"

    return Runtime(
        packs=[echo_pack()],
        providers={"test": FunctionProvider(answer)},
        database_url=url,
        load_entrypoints=False,
    )


@pytest.mark.asyncio
async def test_live_thread_turn_reads_no_row_or_registry_again(tmp_path: Path) -> None:
    seen: list[str] = []
    async with runtime_on(f"sqlite:///{tmp_path / 'sa.db'}", seen) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("one")
        counts = count_row_reads(runtime)
        await thread.send_message("two")
        reopened = await runtime.get_thread(thread.thread_id)  # one read, as the server does
        await reopened.send_message("three")
        assert seen == ["one", "two", "three"]
        assert counts == Counter(row=1)  # only get_thread's row: the registry is known current


@pytest.mark.asyncio
@pytest.mark.parametrize("change", ["env", "registry"])
async def test_commit_from_another_connection_is_read_before_the_turn(
    tmp_path: Path, change: str
) -> None:
    url = f"sqlite:///{tmp_path / 'sa.db'}"
    seen: list[str] = []
    async with runtime_on(url, seen) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("one")
        other = await open_store(url)  # another connection writes the thread meanwhile
        try:
            if change == "env":
                await other.update_thread(thread.thread_id, env={"LATE": "yes"})
            else:
                from sa_core.spec import SubagentRegistryEntry

                entry = SubagentRegistryEntry.model_validate(
                    {
                        "reference": "child-1",
                        "name": "helper",
                        "status": "idle",
                        "created_at": 1,
                    }
                )
                await other.upsert_child(thread.thread_id, entry)
        finally:
            await other.close()
        counts = count_row_reads(runtime)
        await thread.send_message("two")
        assert counts == Counter(row=1, registry=1)  # read again in the acknowledging tx
        live = runtime.kernel.threads.live_row(thread.thread_id)
        assert live is not None
        if change == "env":
            assert live.env == {"LATE": "yes"}
        else:
            assert [e.reference for e in thread.children] == ["child-1"]
        assert seen == ["one", "two"]


@pytest.mark.asyncio
async def test_deleted_thread_is_never_run_from_its_live_handle(tmp_path: Path) -> None:
    seen: list[str] = []
    async with runtime_on(f"sqlite:///{tmp_path / 'sa.db'}", seen) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("one")
        await runtime.delete_thread(thread.thread_id)
        assert not runtime.kernel.threads.is_current(thread.thread_id)
        assert await runtime.store.get_thread(thread.thread_id) is None
        assert seen == ["one"]


@pytest.mark.asyncio
async def test_reopening_a_thread_reads_a_registry_changed_by_another_connection(
    tmp_path: Path,
) -> None:
    from sa_core.spec import SubagentRegistryEntry

    url = f"sqlite:///{tmp_path / 'sa.db'}"
    async with runtime_on(url, []) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("one")
        other = await open_store(url)
        try:
            entry = SubagentRegistryEntry.model_validate(
                {"reference": "child-1", "name": "helper", "status": "idle", "created_at": 1}
            )
            await other.upsert_child(thread.thread_id, entry)
        finally:
            await other.close()
        counts = count_row_reads(runtime)
        reopened = await runtime.get_thread(thread.thread_id)
        assert counts == Counter(row=1, registry=1)
        assert [e.reference for e in reopened.children] == ["child-1"]
        assert [e.reference for e in thread.children] == ["child-1"]  # the same live handle
