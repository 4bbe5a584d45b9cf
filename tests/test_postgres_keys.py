"""API keys across workers on PostgreSQL: verified keys are cached, revocations reach every worker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sa_core import Runtime

pytestmark = pytest.mark.asyncio


def count_reads(store: Any) -> list[int]:
    """Count the store's read operations from now on."""
    backend: Any = store._backend
    counts = [0]
    read = backend.read

    async def counted(op: Any) -> Any:
        counts[0] += 1
        return await read(op)

    backend.read = counted
    return counts


async def test_a_key_revoked_through_one_worker_is_refused_by_another_that_cached_it(
    pg_database_url: str,
) -> None:
    async with Runtime(database_url=pg_database_url, load_entrypoints=False) as first, Runtime(
        database_url=pg_database_url, load_entrypoints=False
    ) as second:
        token, row = await first.store.create_api_key("ci")
        assert await second.store.verify_api_key(token) is not None
        reads = count_reads(second.store)
        for _ in range(3):  # served from the cache: no query
            found = await second.store.verify_api_key(token)
            assert found is not None and found.id == row.id
        assert reads == [0]
        assert await first.store.revoke_api_key(row.id)
        async with asyncio.timeout(60):  # the revocation is notified as it commits
            while await second.store.verify_api_key(token) is not None:
                await asyncio.sleep(0.01)
        assert reads[0] >= 1
        assert await first.store.verify_api_key(token) is None


async def test_without_a_listener_every_verification_reads_the_database(
    pg_database_url: str,
) -> None:
    from sa_core.store import open_store

    async with await open_store(pg_database_url) as store:  # no workers attached (e.g. the CLI)
        token, _row = await store.create_api_key("ci")
        counts = count_reads(store)
        for _ in range(3):
            assert await store.verify_api_key(token) is not None
        assert counts == [3]
