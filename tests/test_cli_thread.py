"""``sa thread fork`` and ``sa thread rewind`` on the database ``sa serve`` uses."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sa_core.cli import main
from sa_core.runtime import Runtime
from timetravel_kit import Lead, pack


@pytest.fixture
def pack_file(tmp_path: Path) -> Path:
    path = tmp_path / "tt_pack.py"
    path.write_text("from timetravel_kit import pack\n\nPACK = pack()\n")
    return path


def stored_thread(url: str) -> tuple[str, list[str]]:
    """A thread with three rounds; its id and its messages' ids."""

    async def build() -> tuple[str, list[str]]:
        async with Runtime(packs=[pack()], providers={"test": Lead().provider}, database_url=url, load_entrypoints=False) as rt:
            thread = await rt.create_thread("lead")
            for text in ("write /a.txt one", "write /a.txt two", "hello"):
                await thread.send_message(text)
            return thread.thread_id, [m.id for m in (await thread.get_messages()).messages]

    return asyncio.run(build())


def read(url: str, thread_id: str) -> dict[str, Any]:
    async def look() -> dict[str, Any]:
        async with Runtime(packs=[pack()], database_url=url, load_entrypoints=False) as rt:
            thread = await rt.get_thread(thread_id)
            page = await thread.get_messages()
            return {"ids": [m.id for m in page.messages], "a": await thread.read_file("/a.txt")}

    return asyncio.run(look())


def test_sa_thread_fork_prints_the_new_thread(tmp_path: Path, pack_file: Path, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path / 'sa.db'}"
    thread_id, ids = stored_thread(url)
    cut = ids[3]  # the first round's answer
    assert main(["thread", "fork", thread_id, "--at", cut, "--db", url, "--pack", str(pack_file)]) == 0
    out, err = capsys.readouterr()
    fork_id = out.strip()
    assert f"Forked thread {thread_id} after message {cut}" in err
    assert read(url, fork_id) == {"ids": ids[:4], "a": b"one"}
    assert main(["thread", "fork", thread_id, "--db", url, "--pack", str(pack_file), "--json"]) == 0
    latest = json.loads(capsys.readouterr().out)
    assert read(url, latest["id"])["ids"] == ids and latest["source"] == thread_id


def test_sa_thread_rewind_rolls_back_in_place_and_names_bad_cuts(
    tmp_path: Path, pack_file: Path, capsys: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'sa.db'}"
    thread_id, ids = stored_thread(url)
    code = main(["thread", "rewind", thread_id, "--to", ids[3], "--db", url, "--pack", str(pack_file)])
    assert code == 0
    assert "6 message(s) left its history" in capsys.readouterr().out
    assert read(url, thread_id) == {"ids": ids[:4], "a": b"one"}
    assert main(["thread", "rewind", thread_id, "--to", ids[1], "--db", url]) == 1
    assert "no results yet" in capsys.readouterr().err
    assert main(["thread", "fork", "missing", "--db", url]) == 1
    assert "Thread missing does not exist" in capsys.readouterr().err
