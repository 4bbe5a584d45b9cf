"""The pack store: put, get and search per second with 10k and 1M items in the store.

Run: ``python benchmarks/store.py [--short] [--postgres]``. For each size the store is filled
with bulk inserts (one transaction per 10,000 rows: items, their full-text rows and 64-float
vectors), then timed through the public API (``PackStore``) on a warm store:

* ``put``: a put of a new item (its own transaction, with its vector);
* ``get``: a get by namespace and key;
* ``search words``: a full-text query of two words over the whole store (FTS5 / ``ts_rank``);
* ``search prefix``: the newest 10 under one user's namespace (no query);
* ``search meaning``: the 10 nearest vectors under one user's namespace (1,000 items), and over
  the whole store (an exact scan: sqlite-vec's ``vec_distance_cosine`` / pgvector's ``<=>``).

Vectors come from a stub embedder (random, precomputed), so the figures are the store's own,
not an embedding model's. ``--short`` stops at 100k instead of 1M. ``--postgres`` runs on a
throwaway PostgreSQL cluster (``tests/pgcluster.py``, pgvector needed) instead of SQLite.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))

from common import parse_args  # noqa: E402

DIMENSIONS = 64
USERS = 1000
CHUNK = 10_000
VOCABULARY = [f"w{n}" for n in range(2000)]
MODEL = "bench:random"


class StubEmbedder:
    """Random vectors: the store's cost, not a model's."""

    model = MODEL
    fields = None

    async def embed(self, texts: list[str], purpose: str) -> list[list[float]]:
        return [random_vector() for _ in texts]


def random_vector() -> list[float]:
    return [random.uniform(-1.0, 1.0) for _ in range(DIMENSIONS)]


def row(n: int, now: int) -> dict[str, Any]:
    from sa_core.store.packitems import namespace_column

    text = " ".join(random.choices(VOCABULARY, k=8))
    return {
        "package": "bench",
        "namespace": namespace_column(("users", str(n % USERS), "notes")),
        "key": f"k{n}",
        "value": {"text": text, "n": n},
        "text": text,
        "created_at": now + n,
        "updated_at": now + n,
        "expires_at": None,
    }


async def fill(store: Any, start: int, stop: int) -> None:
    """Bulk-insert items ``start..stop`` with their full-text rows and vectors."""
    from sqlalchemy import select, text

    from sa_core.store import tables as t
    from sa_core.store.clock import now_us
    from sa_core.store.vectors import encode

    now = now_us()
    for low in range(start, stop, CHUNK):
        rows = [row(n, now) for n in range(low, min(stop, low + CHUNK))]

        def op(conn: Any, rows: list[dict[str, Any]] = rows) -> None:
            conn.execute(t.store_items.insert(), rows)
            keys = [r["key"] for r in rows]
            found = conn.execute(
                select(t.store_items.c.seq, t.store_items.c.text).where(
                    t.store_items.c.package == "bench", t.store_items.c.key.in_(keys)
                )
            ).all()
            dialect = conn.dialect.name
            vectors = [
                {"seq": seq, "model": MODEL, "embedding": encode(random_vector(), dialect)}
                for seq, _ in found
            ]
            conn.execute(t.store_vectors.insert(), vectors)
            if dialect == "sqlite":
                conn.execute(
                    text("INSERT INTO store_items_fts (rowid, text) VALUES (:seq, :text)"),
                    [{"seq": seq, "text": body} for seq, body in found],
                )

        async with store.transaction() as tx:
            await tx.run(op)


async def rate(count: int, call: Callable[[int], Awaitable[Any]]) -> str:
    """``N/s (µs each)`` of ``count`` calls."""
    start = time.perf_counter()
    for n in range(count):
        await call(n)
    elapsed = time.perf_counter() - start
    return f"{count / elapsed:10.0f}/s ({elapsed / count * 1e6:8.0f} µs each, {count} calls)"


async def measure(store: Any, size: int, short: bool) -> None:
    from sa_core.memory import PackStore

    packstore = PackStore(store, "bench", embedder=StubEmbedder())  # type: ignore[arg-type]
    words = PackStore(store, "bench")
    scale = 1 if size <= 100_000 else 4
    user = ("users", "42", "notes")
    figures = {
        "put": await rate(
            500 // scale * 2,
            lambda n: packstore.put(user, f"new{size}-{n}", {"text": f"fresh note {n}"}),
        ),
        "get": await rate(
            2000, lambda n: words.get(("users", str(n % USERS), "notes"), f"k{n * 7 % size}")
        ),
        "search words": await rate(
            200 // scale, lambda n: words.search((), query=" ".join(random.sample(VOCABULARY, 2)))
        ),
        "search prefix": await rate(
            500, lambda n: words.search(("users", str(n % USERS), "notes"))
        ),
        "search meaning, one user": await rate(
            200, lambda n: packstore.search(("users", str(n % USERS)), query="q")
        ),
        "search meaning, whole store": await rate(
            (20 if size <= 100_000 else 3) if not short else 3,
            lambda n: packstore.search((), query="q"),
        ),
    }
    for name, figure in figures.items():
        print(f"  {name:28} {figure}", flush=True)


async def main(database: str, sizes: list[int], short: bool) -> None:
    from sa_core.store import open_store

    store = await open_store(database, vectors=True)
    try:
        filled = 0
        for size in sizes:
            start = time.perf_counter()
            await fill(store, filled, size)
            filled = size
            print(f"{size:,} items (filled in {time.perf_counter() - start:.1f} s):", flush=True)
            await measure(store, size, short)
    finally:
        await store.close()


if __name__ == "__main__":
    args = parse_args(__doc__ or "")
    random.seed(7)
    sizes = [10_000, 100_000] if args.short else [10_000, 1_000_000]
    if args.postgres:
        from conftest import psql  # type: ignore[import-not-found]
        from pgcluster import running_cluster  # type: ignore[import-not-found]

        with running_cluster() as cluster:
            psql(cluster, "CREATE DATABASE bench")
            print("PostgreSQL (throwaway cluster, pgvector)")
            asyncio.run(main(cluster.url("bench"), sizes, args.short))
    else:
        with tempfile.TemporaryDirectory() as workdir:
            print("SQLite (WAL, sqlite-vec)")
            asyncio.run(main(f"sqlite:///{workdir}/store.db", sizes, args.short))
