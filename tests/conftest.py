"""Test-suite fixtures: the database backend each test runs on (SQLite, and PostgreSQL).

The engine, server, composition and store test modules run twice, once per backend: the
``backend`` fixture is parametrised for them and ``sa_database_url`` (the fixture every
Runtime-building test uses) follows it. Other modules run on SQLite only.

PostgreSQL is a real server started once per session from the binaries (see ``pgcluster``);
each test gets its own database, copied from a migrated template (``CREATE DATABASE ...
TEMPLATE``, about 0.2 s). When PostgreSQL cannot start, the PostgreSQL tests fail with the reason.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgcluster import Cluster, PostgresUnavailable, start_cluster

BOTH_BACKENDS = re.compile(
    r"^test_(engine|server|composition|store|postgres|hooks|isolation|fork\.|rewind\.|file_history)"
)
"""Modules whose tests run on SQLite and PostgreSQL."""
TEMPLATE = "sa_template"
_counter = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    """Stopped with SIGTERM (``timeout``), the run ends as on Ctrl-C: fixtures are torn down,
    so the PostgreSQL cluster the tests started is stopped and removed, not left running."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.default_int_handler)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    module = Path(str(metafunc.definition.fspath)).name
    names = ["sqlite", "postgresql"] if BOTH_BACKENDS.match(module) else ["sqlite"]
    metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The database backend of this test: ``sqlite`` or ``postgresql``."""
    return str(getattr(request, "param", "sqlite"))


def run_async(coro: object) -> object:
    """Run a coroutine to completion on a private loop in another thread (safe inside a loop)."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as error:  # noqa: BLE001
            box["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL server for the session, with a migrated template database."""
    try:
        cluster = start_cluster()
    except PostgresUnavailable as error:
        pytest.fail(f"PostgreSQL could not start, so the PostgreSQL tests cannot run: {error}")
    try:
        psql(cluster, f"CREATE DATABASE {TEMPLATE}")
        if psql(cluster, "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
            # pgvector (installed by `make postgres`): the pack stores' search by meaning
            psql(cluster, "CREATE EXTENSION IF NOT EXISTS vector", TEMPLATE)

        async def migrate() -> None:
            from sa_core.store import open_store

            store = await open_store(cluster.url(TEMPLATE))
            await store.close()

        run_async(migrate())
        yield cluster
    finally:
        cluster.stop()


def psql(cluster: Cluster, sql: str, database: str = "postgres") -> str:
    """Run SQL with ``psql`` against the cluster; raise with its error output on failure."""
    done = subprocess.run(
        [str(cluster.bindir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
         cluster.url(database), "-c", sql],
        capture_output=True, text=True, timeout=60, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"psql {sql!r} failed: {done.stderr.strip()}")
    return done.stdout


def new_pg_database(cluster: Cluster, *, template: str = TEMPLATE) -> str:
    """Create a fresh database (a copy of the migrated template) and return its URL."""
    name = f"t{next(_counter)}"
    # FILE_COPY copies the template's files: ~5x faster than the default WAL_LOG (PostgreSQL 15)
    try:
        psql(cluster, f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY")
    except RuntimeError as error:
        if "strategy" not in str(error).lower():  # PostgreSQL before 15 has no STRATEGY
            raise
        psql(cluster, f"CREATE DATABASE {name} TEMPLATE {template}")
    return cluster.url(name)


@pytest.fixture
def pg_database_url(pg_cluster: Cluster) -> str:
    """A fresh PostgreSQL database for this test."""
    return new_pg_database(pg_cluster)


@pytest.fixture
def sa_database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The test's database: SQLite in ``tmp_path``, or a fresh PostgreSQL database."""
    if backend == "postgresql":
        return str(request.getfixturevalue("pg_database_url"))
    return f"sqlite:///{tmp_path / 'sa.db'}"


@pytest.fixture
def pg_empty_database_url(pg_cluster: Cluster) -> str:
    """A fresh, empty PostgreSQL database (no tables) for this test."""
    return new_pg_database(pg_cluster, template="template0")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement sent on an asyncpg connection from now on (one round trip each)."""
    import asyncpg  # type: ignore[import-untyped]

    statements: list[str] = []
    connection = asyncpg.connection.Connection
    for name in ("execute", "fetch", "fetchrow"):
        original = getattr(connection, name)

        def spy(self: Any, query: str, *args: Any, _original: Any = original, **kw: Any) -> Any:
            statements.append(" ".join(query.split()))
            return _original(self, query, *args, **kw)

        monkeypatch.setattr(connection, name, spy)
    yield statements
