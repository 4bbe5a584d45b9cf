"""Durable persistence: the store's tables and the async :class:`Store` the engine writes through.

Open with ``store = await open_store("sqlite:///state/sa.db")``; group a step's writes with
``async with store.transaction() as tx: ... tx=tx``.
"""

from sa_core.store.clock import now_us
from sa_core.store.connect import resolve_database_url
from sa_core.store.interface import Transaction
from sa_core.store.rows import UNSET, ApiKeyRow, EffectRun, QueueEntry, ThreadRow, Unset
from sa_core.store.store import Store, open_store

__all__ = [
    "UNSET",
    "ApiKeyRow",
    "EffectRun",
    "QueueEntry",
    "Store",
    "ThreadRow",
    "Transaction",
    "Unset",
    "now_us",
    "open_store",
    "resolve_database_url",
]
