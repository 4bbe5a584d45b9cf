"""Files with history: every write, delete and move keeps the earlier version; bytes stored once."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlalchemy import func, select

from sa_core.errors import FileSystemError
from sa_core.store import ThreadRow, now_us, open_store
from sa_core.store import tables as t
from timetravel_kit import Lead, pack

pytestmark = pytest.mark.asyncio


async def count(store: Any, table: Any) -> int:
    query = select(func.count()).select_from(table)
    return int(await store.read(lambda conn: conn.execute(query).scalar_one()))


async def test_files_after_each_message_can_be_listed_and_read(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead")
        steps = ["write /a.txt one", "write /a.txt two", "move /a.txt /docs/b.txt", "delete /docs/b.txt"]
        after = []
        for step in steps:
            await thread.send_message(step)
            after.append((await thread.get_messages(order="desc", limit=1)).messages[0].id)
        listed = [[r.path for r in await thread.files_at(message)] for message in after]
        assert listed == [["/a.txt"], ["/a.txt"], ["/docs", "/docs/b.txt"], ["/docs"]]
        assert [await thread.read_file("/a.txt", at=m) for m in after] == [b"one", b"two", None, None]
        assert await thread.read_file("/docs/b.txt", at=after[2]) == b"two"
        assert await thread.read_file("/docs/b.txt") is None  # the current view as before
        first_user = (await thread.get_messages()).messages[0].id
        assert await thread.files_at(first_user) == []
        record = (await thread.files_at(after[0]))[0]
        assert record.content_hash == hashlib.sha256(b"one").hexdigest() and record.size == 3
        with pytest.raises(FileSystemError, match="has no message nope"):
            await thread.files_at("nope")
        with pytest.raises(FileSystemError, match="was a directory"):
            await thread.read_file("/docs", at=after[3])


async def test_equal_contents_are_stored_once_across_writes_copies_moves_and_threads(tmp_path):
    async with await open_store(f"sqlite:///{tmp_path / 'sa.db'}") as store:
        for thread_id in ("t1", "t2"):
            await store.create_thread(ThreadRow(id=thread_id, package="p", agent_id="a"))
        await store.write_file("t1", "/a.bin", b"x" * 1000, "application/octet-stream")
        await store.write_file("t1", "/b.bin", b"x" * 1000, "application/octet-stream")
        await store.write_file("t2", "/c.bin", b"x" * 1000, "application/octet-stream")
        await store.copy_file("t1", "/a.bin", "t2", "/copy.bin")
        await store.move_file("t1", "/b.bin", "/moved.bin")
        assert await count(store, t.file_blobs) == 1
        assert await store.read_file("t2", "/copy.bin") == b"x" * 1000
        assert await store.read_file("t1", "/moved.bin") == b"x" * 1000
        await store.write_file("t1", "/a.bin", b"y", "text/plain")
        assert await count(store, t.file_blobs) == 2
        # t1: a, b (writes), a (write again), moved (write) and b (delete)
        assert await count(store, t.file_versions) == 5 + 1 + 1  # + t2's c and copy


async def test_directory_moves_and_removals_keep_every_earlier_version(tmp_path):
    async with await open_store(f"sqlite:///{tmp_path / 'sa.db'}") as store:
        await store.create_thread(ThreadRow(id="t", package="p", agent_id="a"))
        await store.write_file("t", "/src/a.txt", b"a", "text/plain")
        await store.write_file("t", "/src/deep/b.txt", b"b", "text/plain")
        before_move = now_us()
        moved = await store.move_file("t", "/src", "/dst/inner")
        assert moved.is_directory and moved.path == "/dst/inner"
        assert await store.read_file("t", "/dst/inner/deep/b.txt") == b"b"
        assert [r.path for r in await store.find_files("t", "/src/**")] == []
        after_move = now_us()
        assert await store.rmdir("t", "/dst", recursive=True)
        assert await store.find_files("t", "*") == []
        old = [r.path for r in await store.files_at("t", before_move)]
        assert old == ["/src", "/src/a.txt", "/src/deep", "/src/deep/b.txt"]
        middle = [r.path for r in await store.files_at("t", after_move)]
        assert middle == ["/dst", "/dst/inner", "/dst/inner/a.txt", "/dst/inner/deep", "/dst/inner/deep/b.txt"]
        assert await store.read_file_at("t", "/src/deep/b.txt", before_move) == b"b"
        with pytest.raises(FileSystemError, match="into itself"):
            await store.write_file("t", "/x/y.txt", b"y", "text/plain")
            await store.move_file("t", "/x", "/x/z")


async def test_a_rename_keeps_the_directory_and_the_history(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.write_file("/notes/draft.md", "# draft")
        renamed = await thread.rename_file("/notes/draft.md", "final.md")
        assert renamed.path == "/notes/final.md" and renamed.content_hash == hashlib.sha256(b"# draft").hexdigest()
        assert [r.name for r in await thread.readdir_file("/notes")] == ["final.md"]
        with pytest.raises(FileSystemError, match="without '/'"):
            await thread.rename_file("/notes/final.md", "a/b.md")
