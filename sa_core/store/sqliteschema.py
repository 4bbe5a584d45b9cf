"""Today's SQLite schema as a script: a new SQLite database is created without compiling DDL.

``metadata.create_all`` compiles every table, column, constraint and index each time it runs
(about 35 ms of CPU for a new database, more than the rest of opening the store); the
statements it sends never change between two releases of the schema. ``sqlite_schema.sql``
holds them, as ``create_all`` sends them on SQLite (the ``alembic_version`` table, then every
table of :data:`~sa_core.store.tables.metadata` with its indexes and the full-text table), and
:func:`create_schema` runs them in the caller's transaction. A test keeps the script equal to
what ``create_all`` sends; after a change to the tables, write it again with
``python -m sa_core.store.migrate``.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import MetaData, create_engine, event
from sqlalchemy.engine import Connection

SCRIPT = Path(__file__).with_name("sqlite_schema.sql")
SEPARATOR = "\n;\n"
"""Between two statements: a line holding only ``;`` (no statement has one)."""


def statements() -> list[str]:
    """The statements of :data:`SCRIPT`, in order."""
    text = SCRIPT.read_text(encoding="utf-8")
    return [statement.strip() for statement in text.split(SEPARATOR) if statement.strip()]


def create_schema(conn: Connection) -> None:
    """Create every table of a new, empty SQLite database in the connection's transaction."""
    for statement in statements():
        conn.exec_driver_sql(statement)


def emitted_statements(*metadatas: MetaData) -> list[str]:
    """What ``create_all`` of each metadata, in order, sends to a new (in-memory) SQLite database.

    Trailing spaces are left out of each line (SQLite ignores them), and each table's indexes
    come in name order.
    """
    engine = create_engine("sqlite://")
    sent: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if not statement.lstrip().upper().startswith(("PRAGMA", "SELECT")):
            sent.append("\n".join(line.rstrip() for line in statement.strip().splitlines()))

    event.listen(engine, "before_cursor_execute", record)
    with engine.begin() as conn:
        for metadata in metadatas:
            metadata.create_all(conn, checkfirst=False)
    engine.dispose()
    return _indexes_sorted(sent)


def _indexes_sorted(sent: list[str]) -> list[str]:
    """``sent`` with each table's indexes in name order.

    ``create_all`` takes them from a set, so their order changes from one process to the next.
    """
    ordered: list[str] = []
    indexes: list[str] = []
    for statement in sent:
        if statement.startswith(("CREATE INDEX", "CREATE UNIQUE INDEX")):
            indexes.append(statement)
            continue
        ordered += sorted(indexes)
        indexes = []
        ordered.append(statement)
    return ordered + sorted(indexes)


def write_script(statements: list[str]) -> None:
    """Write :data:`SCRIPT` (see :func:`sa_core.store.migrate.sqlite_statements`)."""
    SCRIPT.write_text(SEPARATOR.join(statements) + "\n", encoding="utf-8")
