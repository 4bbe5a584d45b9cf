"""The thread file system in the store: paths, globs, files, directories, grep, find, copy."""

from __future__ import annotations

import pytest
from store_kit import make_thread, store_on_each_backend

from sa_core.errors import FileSystemError
from sa_core.store import (
    Store,
)
from sa_core.store.paths import glob_matches, normalize_path

store = store_on_each_backend()


# --- files -------------------------------------------------------------------------------------


def test_normalize_path() -> None:
    assert normalize_path("/a/./b/../c.txt") == "/a/c.txt"
    assert normalize_path("attachments//x.txt") == "/attachments/x.txt"
    assert normalize_path("/") == "/"
    for bad in ("/../etc/passwd", "a/../../x", "..", "", "/a\x00b"):
        with pytest.raises(FileSystemError):
            normalize_path(bad)


def test_glob_matches() -> None:
    assert glob_matches("*.txt", "/a/b.txt", "b.txt")
    assert not glob_matches("*.txt", "/a/b.md", "b.md")
    assert glob_matches("/attachments/**", "/attachments/x/y.png", "y.png")
    assert not glob_matches("/attachments/**", "/other/y.png", "y.png")
    assert not glob_matches("/attachments/*", "/attachments/x/y.png", "y.png")
    assert glob_matches("**/*.md", "/a/b/c.md", "c.md")
    assert glob_matches("/**/*.md", "/c.md", "c.md")
    assert glob_matches("file?.[ch]", "/file1.c", "file1.c")
    assert not glob_matches("file[!1].c", "/file1.c", "file1.c")


@pytest.mark.asyncio
async def test_files_basic(store: Store) -> None:
    await make_thread(store)
    record = await store.write_file(
        "t1", "/attachments/report.txt", b"hello\n", "text/plain", metadata={"m": 1}
    )
    assert record.path == "/attachments/report.txt" and record.name == "report.txt"
    assert record.size == 6 and record.metadata == {"m": 1} and not record.is_directory
    assert await store.read_file("t1", "attachments/../attachments/report.txt") == b"hello\n"
    assert await store.read_file("t1", "/missing") is None

    again = await store.write_file("t1", "/attachments/report.txt", b"bye", "text/plain")
    assert again.size == 3 and again.created_at == record.created_at
    assert await store.read_file("t1", "/attachments/report.txt") == b"bye"

    image = await store.write_file(
        "t1", "/attachments/img.png", b"\x89PNG", "image/png", width=4, height=2
    )
    assert (image.width, image.height) == (4, 2)
    stats = await store.file_stats("t1")
    assert (stats.total_size, stats.file_count) == (7, 2)

    assert await store.unlink_file("t1", "/attachments/img.png")
    assert not await store.unlink_file("t1", "/attachments/img.png")
    assert await store.stat_file("t1", "/attachments/img.png") is None


@pytest.mark.asyncio
async def test_files_directories(store: Store) -> None:
    await make_thread(store)
    await store.write_file("t1", "/a/b/c.txt", b"c", "text/plain")
    a = await store.stat_file("t1", "/a")
    assert a is not None and a.is_directory and a.name == "a"
    root = await store.stat_file("t1", "/")
    assert root is not None and root.is_directory
    assert [(r.name, r.is_directory) for r in await store.readdir("t1", "/")] == [("a", True)]
    assert [r.path for r in await store.readdir("t1", "/a")] == ["/a/b"]
    assert [r.path for r in await store.readdir("t1", "/a/b")] == ["/a/b/c.txt"]

    made = await store.mkdir("t1", "/x/y")
    assert made.is_directory and made.path == "/x/y"
    assert (await store.mkdir("t1", "/x/y")).created_at == made.created_at
    assert [r.name for r in await store.readdir("t1", "/")] == ["a", "x"]
    assert await store.readdir("t1", "/x/y") == []

    with pytest.raises(FileSystemError):
        await store.readdir("t1", "/nope")
    with pytest.raises(FileSystemError):
        await store.readdir("t1", "/a/b/c.txt")
    with pytest.raises(FileSystemError):
        await store.mkdir("t1", "/a/b/c.txt")
    with pytest.raises(FileSystemError):
        await store.write_file("t1", "/a/b/c.txt/d", b"", "text/plain")
    with pytest.raises(FileSystemError):
        await store.write_file("t1", "/a/b", b"", "text/plain")
    with pytest.raises(FileSystemError):
        await store.read_file("t1", "/a")
    with pytest.raises(FileSystemError):
        await store.unlink_file("t1", "/a")
    with pytest.raises(FileSystemError):
        await store.write_file("t1", "/../escape.txt", b"", "text/plain")
    with pytest.raises(FileSystemError):
        await store.read_file("t1", "/a/../../etc/passwd")

    with pytest.raises(FileSystemError, match="not empty"):
        await store.rmdir("t1", "/a")
    with pytest.raises(FileSystemError):
        await store.rmdir("t1", "/a/b/c.txt")
    with pytest.raises(FileSystemError):
        await store.rmdir("t1", "/")
    assert await store.rmdir("t1", "/x/y")
    assert not await store.rmdir("t1", "/x/y")
    # LIKE wildcards in names are escaped: removing /a_b must not touch /axb.
    await store.write_file("t1", "/a_b/f.txt", b"1", "text/plain")
    await store.write_file("t1", "/axb/f.txt", b"2", "text/plain")
    assert await store.rmdir("t1", "/a_b", recursive=True)
    assert await store.read_file("t1", "/axb/f.txt") == b"2"
    assert await store.rmdir("t1", "/a", recursive=True)
    assert await store.stat_file("t1", "/a/b/c.txt") is None
    assert [r.name for r in await store.readdir("t1", "/")] == ["axb", "x"]


@pytest.mark.asyncio
async def test_grep_find_copy(store: Store) -> None:
    await make_thread(store)
    await make_thread(store, "t2")
    await store.write_file("t1", "/notes/a.txt", b"alpha\nbeta\nalphabet\n", "text/plain")
    await store.write_file("t1", "/notes/b.md", b"# alpha\n", "text/markdown")
    await store.write_file("t1", "/data.json", b'{"alpha": 1}', "application/json")
    await store.write_file("t1", "/bin.dat", b"alpha", "application/octet-stream")
    await store.write_file("t1", "/attachments/x/y.png", b"png", "image/png")

    results = await store.grep_files("t1", "^alpha")
    assert [(r.path, r.matches, r.line_numbers) for r in results] == [
        ("/notes/a.txt", ["alpha", "alphabet"], [1, 3])
    ]
    results = await store.grep_files("t1", "alpha")
    assert [r.path for r in results] == ["/data.json", "/notes/a.txt", "/notes/b.md"]
    assert await store.grep_files("t1", "alpha(") == []  # invalid regex: taken literally

    found = await store.find_files("t1", "*.txt")
    assert [r.path for r in found] == ["/notes/a.txt"]
    found = await store.find_files("t1", "/attachments/**")
    assert [r.path for r in found] == ["/attachments/x", "/attachments/x/y.png"]
    found = await store.find_files("t1", "**/*.md")
    assert [r.path for r in found] == ["/notes/b.md"]

    copied = await store.copy_file("t1", "/notes/a.txt", "t2", "/copies/a.txt")
    assert copied.path == "/copies/a.txt" and copied.mime_type == "text/plain"
    assert await store.read_file("t2", "/copies/a.txt") == b"alpha\nbeta\nalphabet\n"
    assert [r.path for r in await store.readdir("t2", "/")] == ["/copies"]
    with pytest.raises(FileSystemError):
        await store.copy_file("t1", "/missing", "t2", "/x")
    with pytest.raises(FileSystemError):
        await store.copy_file("t1", "/notes", "t2", "/x")
