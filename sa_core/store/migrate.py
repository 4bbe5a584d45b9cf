"""Versioned schema: Alembic revisions shipped in ``sa_core/store/migrations``, applied on open.

:func:`ensure_schema` runs when a store opens, inside one transaction:

* an empty database gets every table (``create_all``; on SQLite the statements it sends, run
  from a script: :mod:`sa_core.store.sqliteschema`) and is stamped with the head revision;
* a database at the head revision is left alone (two reads: its tables and its revision;
  Alembic is not imported);
* an older database is upgraded with Alembic; a database with tables but no version table is
  one created before migrations existed and is taken as the baseline revision;
* a database at a revision this code does not know (a newer release) is refused.

On PostgreSQL the transaction first takes an advisory lock, so workers starting together
migrate once. A test checks that upgrading from the baseline yields exactly ``create_all``'s
schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, select, text
from sqlalchemy.engine import Connection

from sa_core.store import evaltables as _evaltables  # noqa: F401  (its tables join metadata)
from sa_core.store.sqliteschema import create_schema, emitted_statements, write_script
from sa_core.store.tables import metadata

HEAD = "0012_log_recordings"
"""The newest revision in ``migrations/versions`` (a test keeps the two in step)."""
BASELINE = "0001_baseline"
"""The revision of databases created before migrations existed."""
MIGRATIONS = Path(__file__).with_name("migrations")
_LOCK_KEY = 0x5A_5C_4E_3A
"""``pg_advisory_xact_lock`` key serialising migrations of concurrent workers."""

version_metadata = MetaData()
"""The ``alembic_version`` table alone (created before the store's tables)."""
version_table = Table(
    "alembic_version",
    version_metadata,
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


class SchemaVersionError(RuntimeError):
    """The database was migrated by a newer release than this one."""


def current_revision(conn: Connection) -> str | None:
    """The database's schema revision (``None``: unversioned or empty)."""
    return _revision(conn, _table_names(conn))


def _table_names(conn: Connection) -> set[str]:
    """The database's tables (one catalogue query)."""
    return set(inspect(conn).get_table_names())


def _revision(conn: Connection, tables: set[str]) -> str | None:
    """The revision in ``alembic_version``, read with plain SQL (``None``: no such table)."""
    if "alembic_version" not in tables:
        return None
    return conn.execute(select(version_table.c.version_num)).scalar()


def ensure_schema(conn: Connection) -> str:
    """Create or upgrade the schema to :data:`HEAD` in the connection's open transaction.

    A new database gets today's tables directly, and a current one only two reads: neither
    imports Alembic, which only an upgrade needs.

    Args:
        conn: A connection inside a write transaction.

    Returns:
        What was done: ``"created"``, ``"current"`` or ``"upgraded from <revision>"``.

    Raises:
        SchemaVersionError: The database is at a revision this release does not know.

    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    tables = _table_names(conn)
    revision = _revision(conn, tables)
    if revision == HEAD:
        return "current"
    if not tables and conn.dialect.name == "sqlite":  # a new SQLite file: no DDL to compile
        create_schema(conn)
        conn.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD,))
        return "created"
    if revision is None:
        if "alembic_version" not in tables:
            version_metadata.create_all(conn, checkfirst=False)
        if "threads" not in tables:
            metadata.create_all(conn, checkfirst=bool(tables))  # an empty database: no checks
            conn.execute(version_table.insert().values(version_num=HEAD))
            return "created"
        revision = BASELINE
        conn.execute(version_table.insert().values(version_num=BASELINE))
    upgrade(conn, revision)
    return f"upgraded from {revision}"


def _config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(conn: Connection, revision: str | None, target: str = HEAD) -> None:
    """Run the Alembic revisions after ``revision`` (``None``: from scratch) up to ``target``.

    Raises:
        SchemaVersionError: ``revision`` is not one of the shipped revisions.

    """
    from alembic.runtime.environment import EnvironmentContext
    from alembic.script import ScriptDirectory

    config = _config()
    script = ScriptDirectory.from_config(config)
    known = {rev.revision for rev in script.walk_revisions()}
    if revision is not None and revision not in known:
        raise SchemaVersionError(
            f"The database schema is at revision {revision!r}, which this release of "
            f"standard-agents does not know (newest known: {HEAD!r}); it was migrated by a "
            "newer release: upgrade standard-agents on every worker."
        )

    def steps(rev: Any, _context: Any) -> Any:
        return script._upgrade_revs(target, rev)

    with EnvironmentContext(config, script, fn=steps, destination_rev=target) as env:
        env.configure(connection=conn, target_metadata=metadata)
        env.run_migrations()


def sqlite_statements() -> list[str]:
    """What ``create_all`` sends to a new SQLite database: the version table, then the store's.

    :data:`sa_core.store.sqliteschema.SCRIPT` holds them (a test keeps the two equal).
    """
    return emitted_statements(version_metadata, metadata)


if __name__ == "__main__":  # python -m sa_core.store.migrate: write the SQLite script again
    write_script(sqlite_statements())
    print("wrote sa_core/store/sqlite_schema.sql")
