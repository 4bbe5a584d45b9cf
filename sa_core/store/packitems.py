"""The items of the packs' stores as the store returns them, and how a namespace is stored.

Without SQL: :mod:`sa_core.memory` (``state.store``) checks and converts namespaces with these
while the database layer loads only when the runtime opens the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

SEPARATOR = "\x1f"
"""Ends each label of a namespace in the ``namespace`` column (labels may not contain it)."""


class StoreItem(BaseModel):
    """An item of a pack's store.

    Attributes:
        namespace: Its namespace, a tuple of labels such as ``("users", "42", "notes")``.
        key: Its key in the namespace.
        value: The JSON document.
        created_at: When it was first put (µs since the epoch).
        updated_at: When it was last put (µs).
        expires_at: When it expires (µs), if it was put with a ``ttl``.
        score: How well it matched a search's ``query`` (higher is better), else ``None``.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    expires_at: int | None = None
    score: float | None = None


def namespace_column(labels: Sequence[str]) -> str:
    """A namespace's labels as stored (each followed by the separator)."""
    return "".join(f"{label}{SEPARATOR}" for label in labels)


def namespace_labels(column: str) -> tuple[str, ...]:
    """The labels of a stored namespace."""
    return tuple(column.split(SEPARATOR)[:-1])


__all__ = ["SEPARATOR", "StoreItem", "namespace_column", "namespace_labels"]
