"""Durable persistence: the store's tables and the async :class:`Store` the engine writes through.

Open with ``store = await open_store("sqlite:///state/sa.db")``; group a step's writes with
``async with store.transaction() as tx: ... tx=tx``.

The names load lazily: importing a light module of the package (``sa_core.store.clock``,
``sa_core.store.rows``) or the package itself loads neither SQLAlchemy nor the tables; the
first use of :func:`open_store` or :class:`Store` does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "UNSET": "sa_core.store.rows",
    "ApiKeyRow": "sa_core.store.rows",
    "EffectRun": "sa_core.store.rows",
    "QueueEntry": "sa_core.store.rows",
    "Store": "sa_core.store.store",
    "ThreadRow": "sa_core.store.rows",
    "Transaction": "sa_core.store.interface",
    "Unset": "sa_core.store.rows",
    "now_us": "sa_core.store.clock",
    "open_store": "sa_core.store.store",
    "resolve_database_url": "sa_core.store.connect",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sa_core.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from sa_core.store.clock import now_us
    from sa_core.store.connect import resolve_database_url
    from sa_core.store.interface import Transaction
    from sa_core.store.rows import UNSET, ApiKeyRow, EffectRun, QueueEntry, ThreadRow, Unset
    from sa_core.store.store import Store, open_store
