"""A pack store's search by meaning: an embedding model, vectors in sqlite-vec or pgvector."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from echo_agent import echo_pack

from sa_core import Pack, Runtime, StoreConfig, define_model
from sa_core.errors import ConfigurationError, ProviderError, StoreError
from sa_core.providers import BaseProvider, ProviderRequest, ProviderResponse
from sa_core.testing import FunctionProvider



def embedding_pack(fields: list[str] | None = None, provider: str = "test") -> Pack:
    pack = echo_pack()
    embed = define_model(name="embed", provider=provider, model="hash", kind="embedding")
    pack.models = [*pack.models, embed]
    pack.store = StoreConfig(embedding_model="embed", fields=fields)
    return pack


@asynccontextmanager
async def running(url: str, pack: Pack, provider: Any = None) -> AsyncIterator[Runtime]:
    provider = provider or FunctionProvider(lambda request: "ok")
    async with Runtime(
        packs=[pack], providers={"test": provider}, database_url=url, load_entrypoints=False
    ) as runtime:
        yield runtime


async def vector_rows(runtime: Runtime) -> int:
    return int(
        await runtime.store.read(
            lambda conn: conn.exec_driver_sql("SELECT count(*) FROM store_vectors").scalar()
        )
    )


@pytest.mark.asyncio
async def test_search_by_meaning_finds_what_words_alone_miss_nearest_first(
    sa_database_url: str,
) -> None:
    provider = FunctionProvider(lambda request: "ok")
    async with running(sa_database_url, embedding_pack(["text"]), provider) as runtime:
        store = runtime.pack_store("echo")
        await store.put(("menu",), "tea", {"text": "a cup of tea", "kind": "drink"})
        await store.put(("menu",), "teas", {"text": "teas of the world", "kind": "shop"})
        await store.put(("menu",), "coffee", {"text": "black coffee", "kind": "drink"})
        await store.put(("other",), "x", {"text": "teas teas"})

        hits = await store.search(("menu",), query="tea")
        assert [hit.key for hit in hits] == ["tea", "teas", "coffee"]  # every item, nearest first
        assert hits[0].score is not None and hits[1].score is not None
        assert hits[0].score > hits[1].score > 0 and hits[2].score == pytest.approx(0.0, abs=1e-6)
        # words alone: "teas" is not "tea" (no stemming), so only one item would match
        assert [h.key for h in await store.search(("menu",), query="teas", limit=2)] == [
            "teas",
            "tea",
        ]
        drinks = await store.search(("menu",), query="tea", filter={"kind": "drink"})
        assert [hit.key for hit in drinks] == ["tea", "coffee"]
        page = await store.search(("menu",), query="tea", limit=1, offset=1)
        assert [hit.key for hit in page] == ["teas"]
        assert [hit.key for hit in await store.search(("menu",))] == ["coffee", "teas", "tea"]

        purposes = [(r.purpose, r.inputs) for r in provider.embedding_requests]
        assert purposes[0] == ("document", ["a cup of tea"])  # the pack's fields: text only
        assert ("query", ["tea"]) in purposes
        assert await vector_rows(runtime) == 4
        await store.put(("menu",), "tea", {"text": "black coffee, strong", "kind": "drink"})
        assert (await store.search(("menu",), query="tea"))[0].key == "teas"  # re-embedded
        assert await vector_rows(runtime) == 4
        assert await store.delete(("menu",), "tea") is True
        assert await vector_rows(runtime) == 3


@pytest.mark.asyncio
async def test_the_packs_fields_and_a_puts_index_choose_what_is_embedded(
    sa_database_url: str,
) -> None:
    provider = FunctionProvider(lambda request: "ok")
    async with running(sa_database_url, embedding_pack(["title", "meta.note"]), provider) as rt:
        store = rt.pack_store("echo")
        await store.put(("d",), "a", {"title": "Lisbon", "body": "x", "meta": {"note": "sunny"}})
        await store.put(("d",), "b", {"title": "Oslo", "body": "cold"}, index=["body"])
        await store.put(("d",), "c", {"title": "Riga"}, index=False)
        await store.put(("d",), "d", {"body": "nothing under the fields"})
        assert [r.inputs for r in provider.embedding_requests] == [["Lisbon\nsunny"], ["cold"]]
        assert await vector_rows(rt) == 2
        hits = await store.search(("d",), query="sunny Lisbon")
        assert [hit.key for hit in hits] == ["a", "b"]  # c and d have no vector
        assert [hit.key for hit in await store.search(("d",), filter={"title": "Riga"})] == ["c"]
        with pytest.raises(StoreError, match="index must be a list of dotted paths"):
            await store.put(("d",), "e", {"title": "x"}, index="title")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_expired_and_deleted_items_leave_no_vectors(
    sa_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sa_core.memory

    now = [1_900_000_000_000_000]
    monkeypatch.setattr(sa_core.memory, "now_us", lambda: now[0])
    async with running(sa_database_url, embedding_pack()) as runtime:
        store = runtime.pack_store("echo")
        await store.put(("s",), "brief", {"text": "gone soon"}, ttl=1)
        await store.put(("s",), "kept", {"text": "here to stay"})
        now[0] += 2_000_000
        assert [hit.key for hit in await store.search(("s",), query="gone soon")] == ["kept"]
        await store.put(("s",), "other", {"text": "a write purges what expired"})
        assert await vector_rows(runtime) == 2


@pytest.mark.asyncio
async def test_a_provider_without_embeddings_is_a_clear_error(sa_database_url: str) -> None:
    class ChatOnly(BaseProvider):
        name = "chatonly"

        async def generate(self, request: ProviderRequest) -> ProviderResponse:
            return ProviderResponse(content="hi")

    pack = embedding_pack(provider="chatonly")
    async with Runtime(
        packs=[pack],
        providers={"test": FunctionProvider(lambda r: "ok"), "chatonly": ChatOnly()},
        database_url=sa_database_url,
        load_entrypoints=False,
    ) as runtime:
        store = runtime.pack_store("echo")
        with pytest.raises(ProviderError, match="Provider 'chatonly' has no embeddings API"):
            await store.put(("a",), "k", {"text": "hello"})
        assert await store.get(("a",), "k") is None  # nothing stored


@pytest.mark.asyncio
async def test_without_sqlite_vec_a_pack_with_an_embedding_model_says_what_to_install(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # import sqlite_vec fails
    with pytest.raises(ConfigurationError, match=r"sqlite-vec package: pip install"):
        async with running(f"sqlite:///{tmp_path / 'sa.db'}", embedding_pack()):
            pass
    async with running(f"sqlite:///{tmp_path / 'sa.db'}", echo_pack()) as runtime:
        await runtime.pack_store("echo").put(("a",), "k", {"text": "words only"})  # no vectors


@pytest.mark.asyncio
async def test_without_pgvector_the_error_names_the_debian_package() -> None:
    from sa_core.store.vectors import ensure_pgvector

    class Result:
        def first(self) -> None:
            return None

        def scalar(self) -> str:
            return "150018"

    class NoPgvector:
        def execute(self, statement: Any) -> Result:
            return Result()

    with pytest.raises(ConfigurationError, match=r"apt-get install postgresql-15-pgvector"):
        ensure_pgvector(NoPgvector())  # type: ignore[arg-type]


def test_embedding_models_are_validated_with_every_problem_at_once() -> None:
    from sa_core import PackValidationError, define_prompt

    pack = embedding_pack()
    pack.prompts = [
        define_prompt(name="main", model="embed", prompt="Echo.", include_chat=True),
    ]
    pack.models = [
        *pack.models,
        define_model(name="chat2", provider="test", model="y", fallbacks=["embed"]),
    ]
    pack.store = {"embedding_model": "m", "fields": ["a..b"]}
    with pytest.raises(PackValidationError) as caught:
        pack.validate()
    problems = caught.value.problems
    assert "prompt 'main': model 'embed' is an embedding model" in problems[0]
    assert "model 'chat2': fallback 'embed' is of kind 'embedding'" in problems[1]
    assert "store.embedding_model 'm' is a chat model" in problems[2]
    assert "store.fields entry 'a..b' is not a dotted path" in problems[3]
    assert len(problems) == 4
    pack.store = {"embedding_model": "nope", "colour": "red"}
    with pytest.raises(PackValidationError, match="store is not a valid StoreConfig"):
        pack.validate()
