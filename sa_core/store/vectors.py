"""Vector support of the store: ``sqlite-vec`` on SQLite, ``pgvector`` on PostgreSQL.

Needed only when a pack declares an embedding model for its store (``open_store(url,
vectors=True)``); a store without it never imports either. Each is used when installed, and a
missing one is a :class:`~sa_core.errors.ConfigurationError` naming what to install:

* SQLite: the ``sqlite-vec`` package (``pip install 'standard-agents[vectors]'``), loaded into
  every connection. Loading an extension needs a ``sqlite3`` module built with loadable
  extensions; when this Python's is not (some pyenv and distribution builds), the store opens
  its connections with ``sqlean.py`` (the same SQLite, with extensions on; in the same extra).
* PostgreSQL: the ``vector`` extension on the server (Debian's ``postgresql-NN-pgvector``);
  the store runs ``CREATE EXTENSION IF NOT EXISTS vector`` when it opens.

Vectors are stored as float32 values (:func:`encode`) and compared by cosine distance:
``vec_distance_cosine`` on SQLite, ``<=>`` on PostgreSQL (:func:`cosine_distance`).
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from sqlalchemy import Float, String, bindparam, cast, func, text
from sqlalchemy.engine import Connection
from sqlalchemy.types import UserDefinedType

from sa_core.errors import ConfigurationError
from sa_core.store import tables as t

INSTALL = "pip install 'standard-agents[vectors]'"
"""How to install what SQLite needs for vectors."""
_V = t.store_vectors.c


def _loads_extensions(module: Any) -> bool:
    return hasattr(module.Connection, "enable_load_extension")


def sqlite_module() -> ModuleType:
    """The DB-API module SQLite connections with vectors open with: ``sqlite3`` or ``sqlean``.

    Raises:
        ConfigurationError: ``sqlite-vec`` is not installed, or no ``sqlite3`` module here
            can load it.
    """
    try:
        import sqlite_vec  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "A pack's store declares an embedding model, and search by meaning on SQLite "
            f"needs the sqlite-vec package: {INSTALL} (or pip install sqlite-vec)."
        ) from None
    if _loads_extensions(sqlite3):
        return sqlite3
    try:
        import sqlean  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigurationError(
            "A pack's store declares an embedding model, but this Python's sqlite3 cannot load "
            "extensions (it was built without --enable-loadable-sqlite-extensions), so "
            f"sqlite-vec cannot be loaded: {INSTALL} (it brings sqlean.py, a sqlite3 that "
            "can), or use a Python whose sqlite3 can."
        ) from None
    module: ModuleType = sqlean
    return module


def load_sqlite_vec(dbapi_connection: Any) -> None:
    """Load ``sqlite-vec`` into a DB-API connection (extension loading is off again after)."""
    import sqlite_vec

    dbapi_connection.enable_load_extension(True)
    try:
        sqlite_vec.load(dbapi_connection)
    finally:
        dbapi_connection.enable_load_extension(False)


def refuse_aiosqlite() -> None:
    """Vectors on ``sqlite+aiosqlite``: always a :class:`ConfigurationError` saying what to do.

    aiosqlite opens its connections with the stdlib ``sqlite3`` in a thread of its own, where
    the store loads no extension; the default ``sqlite:///`` backend loads ``sqlite-vec``.
    """
    raise ConfigurationError(
        "A pack's store declares an embedding model, and search by meaning is not available "
        "on sqlite+aiosqlite:// URLs: use a sqlite:/// URL (the default backend, which loads "
        "sqlite-vec) or PostgreSQL with pgvector."
    )


def ensure_pgvector(conn: Connection) -> None:
    """Create the ``vector`` extension in the database if it is not there yet.

    Raises:
        ConfigurationError: the server has no pgvector, or the extension cannot be created.
    """
    if conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first():
        return
    available = conn.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).first()
    version = conn.execute(text("SHOW server_version_num")).scalar()
    major = int(str(version)) // 10000 if version else "NN"
    if available is None:
        raise ConfigurationError(
            "A pack's store declares an embedding model, and search by meaning on PostgreSQL "
            f"needs the pgvector extension, which this server does not have: install it on "
            f"the database server (Debian: apt-get install postgresql-{major}-pgvector), then "
            "restart."
        )
    try:
        with conn.begin_nested():
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except Exception as error:  # noqa: BLE001 - a permission error, reported as what to do
        raise ConfigurationError(
            "A pack's store declares an embedding model, and the pgvector extension could not "
            f"be created in this database ({str(error).splitlines()[0]}): have a superuser run "
            "CREATE EXTENSION vector in it."
        ) from None


def encode(vector: Sequence[float], dialect: str) -> Any:
    """A vector as the ``embedding`` column holds it on ``dialect``."""
    if dialect == "postgresql":
        return [float(x) for x in vector]
    return struct.pack(f"<{len(vector)}f", *vector)


class _PgVector(UserDefinedType[Any]):
    """pgvector's ``vector`` type, for casts (the column itself is a ``real[]``)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


def cosine_distance(conn: Connection, vector: Sequence[float]) -> tuple[Any, Any]:
    """``(distance, same_length)``: the cosine distance of each stored vector to ``vector``.

    ``same_length`` keeps only vectors of the query's length (a model whose dimensions
    changed leaves older vectors that cannot be compared).
    """
    if conn.dialect.name == "postgresql":
        query = "[" + ",".join(repr(float(x)) for x in vector) + "]"
        target = cast(bindparam("query_vector", query, type_=String), _PgVector())
        distance = cast(_V.embedding, _PgVector()).op("<=>", return_type=Float())(target)
        return distance, func.array_length(_V.embedding, 1) == len(vector)
    blob = encode(vector, "sqlite")
    sqlite_distance = func.vec_distance_cosine(_V.embedding, blob, type_=Float())
    return sqlite_distance, func.length(_V.embedding) == len(blob)


__all__ = [
    "INSTALL",
    "refuse_aiosqlite",
    "cosine_distance",
    "encode",
    "ensure_pgvector",
    "load_sqlite_vec",
    "sqlite_module",
]
