"""The pack stores' items, namespaces as stored, and the writes a tool holds.

Items as the store returns them, how a namespace is stored, and the writes a tool makes, held
until they commit with its result. Without SQL: :mod:`sa_core.memory` (``state.store``) and the
engine use these while the database layer loads only when the runtime opens the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


def searchable_text(value: Any) -> str:
    """Every string in a JSON document (keys aside), one per line: what search matches."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(filter(None, (searchable_text(v) for v in value.values())))
    if isinstance(value, list):
        return "\n".join(filter(None, (searchable_text(v) for v in value)))
    return ""


@dataclass(slots=True)
class ItemWrite:
    """A put (``value`` set) or a delete (``value`` ``None``) of one item, not yet written."""

    package: str
    namespace: str
    key: str
    value: dict[str, Any] | None
    now: int
    expires_at: int | None = None
    vector: Sequence[float] | None = None
    model: str | None = None
    created_at: int = 0
    """When the item was first put, as its reader sees it before the write commits."""


class StoreWrites:
    """Writes to packs' stores held back until they commit with a tool's result.

    The last write of each item wins; :meth:`take` hands them over in the order first made.
    """

    __slots__ = ("_writes",)

    def __init__(self) -> None:
        self._writes: dict[tuple[str, str, str], ItemWrite] = {}

    def __bool__(self) -> bool:
        return bool(self._writes)

    def record(self, write: ItemWrite) -> None:
        """Hold ``write`` (replacing an earlier one of the same item)."""
        self._writes[(write.package, write.namespace, write.key)] = write

    def get(self, package: str, namespace: str, key: str) -> ItemWrite | None:
        """The write held for an item, if any."""
        return self._writes.get((package, namespace, key))

    def take(self) -> list[ItemWrite]:
        """Every write held, oldest first; none are held afterwards."""
        writes = list(self._writes.values())
        self._writes.clear()
        return writes


__all__ = [
    "SEPARATOR",
    "ItemWrite",
    "StoreItem",
    "StoreWrites",
    "namespace_column",
    "namespace_labels",
    "searchable_text",
]
