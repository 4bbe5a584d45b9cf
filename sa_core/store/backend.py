"""Database backends behind one small interface, and the transaction machinery of the store.

Every repository operation is a *synchronous* function of a SQLAlchemy ``Connection`` built
from portable Core statements. A backend decides how that function runs:

* :class:`SQLiteBackend` (``sqlite:///file.db``, the embedded default) runs it inline on the
  event loop thread with the stdlib ``sqlite3`` driver: one writer and one reader connection,
  WAL, ``synchronous=NORMAL``. A statement costs tens of microseconds, far less than handing it
  to a driver thread (aiosqlite costs ~1.5 ms per model step here), so nothing is offloaded.
* :class:`AsyncBackend` (``sqlite+aiosqlite://``, ``postgresql+asyncpg://``) runs it through
  ``AsyncConnection.run_sync``: one hop per operation, not one per statement.

Writes are serialised by one ``asyncio.Lock`` per store, so SQLite never reports "database is
locked" from within the process; write transactions start with ``BEGIN IMMEDIATE``.
"""

from sa_core.store.ambient import detached_context
from sa_core.store.asyncbackend import POOL_OVERFLOW, POOL_SIZE, AsyncBackend
from sa_core.store.interface import Backend, Op, Transaction
from sa_core.store.sqlitebackend import SQLiteBackend
from sa_core.store.storebase import StoreBase

__all__ = [
    "POOL_OVERFLOW",
    "POOL_SIZE",
    "AsyncBackend",
    "Backend",
    "Op",
    "SQLiteBackend",
    "StoreBase",
    "Transaction",
    "detached_context",
]
