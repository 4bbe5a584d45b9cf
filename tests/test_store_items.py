"""``state.store``: a pack's durable, namespaced, searchable memory, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from echo_agent import echo_pack, echo_provider

from sa_core import Pack, Runtime, define_tool
from sa_core.errors import StoreError

pytestmark = pytest.mark.asyncio


def remember_pack() -> Pack:
    """The echo pack with a ``remember`` tool that writes to the pack's store."""

    async def remember(state: Any, args: dict[str, Any]) -> str:
        await state.store.put(("users", "ada"), "note", {"text": args["text"]})
        return "remembered"

    pack = echo_pack()
    pack.tools = [define_tool(name="remember", args={"type": "object"}, execute=remember)]
    return pack


@asynccontextmanager
async def running(url: str, *packs: Pack) -> AsyncIterator[Runtime]:
    async with Runtime(
        packs=list(packs) or [remember_pack()],
        providers={"test": echo_provider()},
        database_url=url,
        load_entrypoints=False,
    ) as runtime:
        yield runtime


async def test_threads_of_a_pack_share_its_store_and_it_survives_a_restart(
    sa_database_url: str,
) -> None:
    async with running(sa_database_url) as runtime:
        writer = await runtime.create_thread("helper")
        await writer.invoke_tool("remember", {"text": "likes green tea"})
        reader = await runtime.create_thread("helper")
        item = await reader.store.get(("users", "ada"), "note")
        assert item is not None
        assert (item.namespace, item.key, item.value) == (
            ("users", "ada"),
            "note",
            {"text": "likes green tea"},
        )
        assert item.created_at == item.updated_at
    async with running(sa_database_url) as runtime:
        again = await runtime.pack_store("echo").get(("users", "ada"), "note")
        assert again is not None and again.value == {"text": "likes green tea"}
        replaced = await runtime.pack_store("echo").put(("users", "ada"), "note", {"text": "tea"})
        assert replaced.created_at == again.created_at < replaced.updated_at
        assert await runtime.pack_store("echo").delete(("users", "ada"), "note") is True
        assert await runtime.pack_store("echo").get(("users", "ada"), "note") is None
        assert await runtime.pack_store("echo").delete(("users", "ada"), "note") is False


async def test_another_pack_cannot_see_the_store(sa_database_url: str) -> None:
    other = echo_pack()
    other.name = "other"
    async with running(sa_database_url, remember_pack(), other) as runtime:
        await runtime.pack_store("echo").put(("shared",), "k", {"v": "echo's"})
        assert await runtime.pack_store("other").get(("shared",), "k") is None
        assert await runtime.pack_store("other").search(()) == []
        assert await runtime.pack_store("other").list_namespaces() == []


async def test_search_ranks_text_matches_under_a_prefix_and_filters_fields(
    sa_database_url: str,
) -> None:
    async with running(sa_database_url) as runtime:
        store = runtime.pack_store("echo")
        docs = {
            "a": {"text": "green tea with lemon", "kind": "drink", "stars": 5},
            "b": {"text": "black coffee", "kind": "drink", "stars": 3},
            "c": {"text": "green salad, no tea", "kind": "food", "stars": 4},
            "d": {"text": "tea tea green tea", "kind": "drink", "stars": 2},
        }
        for key, value in docs.items():
            await store.put(("menu", "cafe"), key, value)
        await store.put(("menu", "bar"), "e", {"text": "green tea cocktail", "kind": "drink"})
        await store.put(("notes",), "f", {"text": "green tea at four"})

        hits = await store.search(("menu", "cafe"), query="green tea")
        assert {hit.key for hit in hits} == {"a", "c", "d"}  # any word; coffee has neither
        assert all(hit.score is not None and hit.score > 0 for hit in hits)
        assert hits[0].key == "d"  # the most occurrences rank first
        menu = await store.search(("menu",), query="tea")
        assert {hit.key for hit in menu} == {"a", "c", "d", "e"}  # not ("notes",)
        everything = await store.search((), query="tea", limit=100)
        assert {hit.key for hit in everything} == {"a", "c", "d", "e", "f"}

        drinks = await store.search(("menu",), query="tea", filter={"kind": "drink"})
        assert {hit.key for hit in drinks} == {"a", "d", "e"}
        good = await store.search(("menu", "cafe"), filter={"stars": {"$gte": 4}})
        assert {hit.key for hit in good} == {"a", "c"}
        assert [hit.score for hit in good] == [None, None]  # no query: newest first, no score
        assert [hit.key for hit in await store.search(("menu", "cafe"))] == ["d", "c", "b", "a"]
        page = await store.search(("menu", "cafe"), filter={"kind": "drink"}, limit=1, offset=1)
        assert [hit.key for hit in page] == ["b"]
        await store.delete(("menu", "cafe"), "d")
        assert "d" not in {hit.key for hit in await store.search((), query="tea", limit=100)}


async def test_list_namespaces_under_a_prefix_and_to_a_depth(sa_database_url: str) -> None:
    async with running(sa_database_url) as runtime:
        store = runtime.pack_store("echo")
        for namespace in [("users", "1", "notes"), ("users", "1", "prefs"), ("users", "2"), ("x",)]:
            await store.put(namespace, "k", {"v": 1})
        assert await store.list_namespaces() == [
            ("users", "1", "notes"),
            ("users", "1", "prefs"),
            ("users", "2"),
            ("x",),
        ]
        assert await store.list_namespaces(("users",), max_depth=2) == [
            ("users", "1"),
            ("users", "2"),
        ]
        assert await store.list_namespaces(("users", "1"), limit=1, offset=1) == [
            ("users", "1", "prefs")
        ]
        assert await store.list_namespaces(("user",)) == []  # labels, not characters


async def test_an_item_put_with_a_ttl_is_gone_once_it_expires(
    sa_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sa_core.memory

    now = [1_900_000_000_000_000]
    monkeypatch.setattr(sa_core.memory, "now_us", lambda: now[0])
    async with running(sa_database_url) as runtime:
        store = runtime.pack_store("echo")
        kept = await store.put(("s",), "kept", {"text": "stays"})
        brief = await store.put(("s",), "brief", {"text": "goes away"}, ttl=60)
        assert kept.expires_at is None
        assert brief.expires_at == now[0] + 60_000_000
        now[0] += 59_000_000
        assert await store.get(("s",), "brief") is not None
        now[0] += 2_000_000
        assert await store.get(("s",), "brief") is None
        assert [hit.key for hit in await store.search(("s",))] == ["kept"]
        assert await store.search(("s",), query="away") == []
        await store.put(("s",), "other", {"text": "a write purges what expired"})
        count = await runtime.store.read(
            lambda conn: conn.exec_driver_sql("SELECT count(*) FROM store_items").scalar()
        )
        assert count == 2


async def test_bad_arguments_are_one_error_listing_every_problem(sa_database_url: str) -> None:
    async with running(sa_database_url) as runtime:
        store = runtime.pack_store("echo")
        with pytest.raises(StoreError) as caught:
            await store.put("users", "", ["not", "a", "dict"], ttl=-1)  # type: ignore[arg-type]
        problems = caught.value.problems
        assert len(problems) == 4
        assert problems[0].startswith("namespace must be a tuple of strings")
        assert problems[1] == "key must be a non-empty string, not ''"
        assert problems[2] == "value must be a JSON object (a dict), not list"
        assert problems[3].startswith("ttl must be a number of seconds above 0")
        with pytest.raises(StoreError, match=r"store.search: .*labels must be non-empty"):
            await store.search(("users", ""))
        with pytest.raises(StoreError, match=r"unknown operator\(s\) \['\$regex'\]"):
            await store.search((), filter={"name": {"$regex": "a.*"}})
        with pytest.raises(StoreError, match="limit must be an integer from 1 to 1000"):
            await store.search((), limit=0)
        with pytest.raises(StoreError, match="value must be JSON-serialisable"):
            await store.put(("a",), "k", {"when": object()})
