"""A pack's store: memory its threads share, durable, namespaced, searchable (``state.store``).

    await state.store.put(("users", user_id), "preferences", {"tone": "brief"})
    item = await state.store.get(("users", user_id), "preferences")
    hits = await state.store.search(("users",), query="brief tone", filter={"tone": "brief"})
    await state.store.list_namespaces(("users",))   # [("users", "42"), ...]
    await state.store.delete(("users", user_id), "preferences")

Every thread of a package sees the same store (and ``runtime.pack_store(package)`` and the
HTTP routes under ``/api/packages/{package}/store`` do too); other packages' stores are out of
reach. Namespaces are tuples of strings; values are JSON objects. ``search`` ranks by full-text
match of the values' strings (SQLite FTS5, PostgreSQL full-text search), or by meaning when the
pack declares an embedding model (``Pack(store=StoreConfig(embedding_model=...))``: vectors in
sqlite-vec or pgvector), and then applies ``filter`` to the values' fields. An item put with
``ttl`` (seconds) is gone once it expires.

Inside a tool, writes are held and commit with the tool's result (in the transaction that
stores its row), so a crash mid-step leaves none of them; ``get`` sees them at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sa_core.errors import StoreError
from sa_core.store.clock import now_us
from sa_core.store.packitems import (
    SEPARATOR,
    ItemWrite,
    StoreItem,
    StoreWrites,
    namespace_column,
    namespace_labels,
    searchable_text,
)

if TYPE_CHECKING:
    from sa_core.embeddings import Purpose
    from sa_core.store import Store

Namespace = tuple[str, ...]
Index = bool | Sequence[str] | None
"""What of a value is embedded: ``None`` the pack's ``fields``, a list those dotted paths,
``False`` nothing (the item is then found by words and filters, not by meaning)."""
MAX_LIMIT = 1000
"""The most items one ``search`` (or namespaces one ``list_namespaces``) returns."""
_BATCH = 200
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")


def _label_problems(labels: Any, what: str, *, allow_empty: bool) -> list[str]:
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        return [f"{what} must be a tuple of strings such as ('users', '42'), not {labels!r}"]
    if not labels and not allow_empty:
        return [f"{what} is empty; give at least one label, e.g. ('notes',)"]
    bad = [x for x in labels if not isinstance(x, str) or not x or SEPARATOR in x]
    if bad:
        return [f"{what} labels must be non-empty strings (without U+001F); got {bad!r}"]
    return []


def _check(operation: str, problems: list[str]) -> None:
    if problems:
        raise StoreError(operation, problems)


def _check_key(key: Any) -> list[str]:
    if not isinstance(key, str) or not key:
        return [f"key must be a non-empty string, not {key!r}"]
    return []


def _check_limit(limit: Any, offset: Any) -> list[str]:
    problems = []
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        problems.append(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        problems.append(f"offset must be an integer of 0 or more, not {offset!r}")
    return problems


def _check_index(index: Any) -> list[str]:
    if index is None or isinstance(index, bool):
        return []
    if isinstance(index, str) or not isinstance(index, Sequence):
        return [f"index must be a list of dotted paths, False or None, not {index!r}"]
    bad = [path for path in index if not isinstance(path, str) or not path]
    return [f"index paths must be non-empty strings; got {bad!r}"] if bad else []


def _check_value(value: Any, ttl: Any) -> list[str]:
    problems = []
    if not isinstance(value, Mapping):
        problems.append(f"value must be a JSON object (a dict), not {type(value).__name__}")
    else:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append(f"value must be JSON-serialisable: {exc}")
    if ttl is not None and (
        isinstance(ttl, bool)
        or not isinstance(ttl, int | float)
        or not math.isfinite(ttl)
        or ttl <= 0
    ):
        problems.append(f"ttl must be a number of seconds above 0 (or None), not {ttl!r}")
    return problems


def _field(value: Mapping[str, Any], path: str) -> Any:
    """A field of a document by dotted path (``"author.name"``), or ``None``."""
    found: Any = value
    for part in path.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return None
        found = found[part]
    return found


def _holds(actual: Any, operator: str, expected: Any) -> bool:
    if operator == "$eq":
        return bool(actual == expected)
    if operator == "$ne":
        return bool(actual != expected)
    if operator in ("$in", "$nin"):
        inside = isinstance(expected, list | tuple) and actual in expected
        return inside if operator == "$in" else not inside
    try:
        if operator == "$gt":
            return bool(actual > expected)
        if operator == "$gte":
            return bool(actual >= expected)
        if operator == "$lt":
            return bool(actual < expected)
        return bool(actual <= expected)
    except TypeError:  # None or another type: no order, no match
        return False


def embedding_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """What of a value is embedded: the strings under ``fields`` (``None``: all), by line."""
    if fields is None:
        return searchable_text(dict(value))
    return "\n".join(filter(None, (searchable_text(_field(value, path)) for path in fields)))


class Embedder(Protocol):
    """Turns a pack store's texts into vectors (``engine/model/embedder.py``)."""

    @property
    def model(self) -> str:
        """What the vectors are tagged with (``provider:model``)."""
        ...

    @property
    def fields(self) -> list[str] | None:
        """The pack's ``store.fields``: what of a value is embedded (``None``: every string)."""
        ...

    async def embed(self, texts: list[str], purpose: Purpose) -> list[list[float]]:
        """One vector per text."""
        ...


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether a document passes a filter: ``{field: value}`` or ``{field: {"$gt": 3, ...}}``.

    Fields may be dotted paths; operators are ``$eq $ne $gt $gte $lt $lte $in $nin``.
    """
    for path, condition in filter.items():
        actual = _field(value, path)
        if isinstance(condition, Mapping) and condition and all(k in _OPERATORS for k in condition):
            if not all(_holds(actual, op, expected) for op, expected in condition.items()):
                return False
        elif actual != condition:
            return False
    return True


def _filter_problems(filter: Any) -> list[str]:
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        return [f"filter must be a dict of field: value, not {filter!r}"]
    problems = []
    for path, condition in filter.items():
        if isinstance(condition, Mapping):
            unknown = [k for k in condition if str(k).startswith("$") and k not in _OPERATORS]
            if unknown:
                problems.append(
                    f"filter field {path!r}: unknown operator(s) {unknown}; use "
                    f"{', '.join(_OPERATORS)}"
                )
    return problems


class PackStore:
    """The store of one package (see the module docstring).

    Args:
        store: The runtime's durable store.
        package: The package whose items these are.
        embedder: The pack's embedding model, when it declares one (search by meaning).
        held: Where a running tool's writes wait for its result's commit; ``None``: each
            write commits at once.
    """

    __slots__ = ("_store", "package", "_embedder", "_held")

    def __init__(
        self,
        store: Store,
        package: str,
        *,
        embedder: Embedder | None = None,
        held: StoreWrites | None = None,
    ) -> None:
        self._store = store
        self.package = package
        self._embedder = embedder
        self._held = held

    async def _vector(self, value: Mapping[str, Any], index: Index) -> list[float] | None:
        """The embedding of what ``index`` picks of ``value``, or ``None`` (nothing to embed)."""
        embedder = self._embedder
        if embedder is None or index is False:
            return None
        fields = embedder.fields if index is None or index is True else list(index)
        text = embedding_text(value, fields)
        if not text.strip():
            return None
        return (await embedder.embed([text], "document"))[0]

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        ttl: float | None = None,
        *,
        index: Index = None,
    ) -> StoreItem:
        """Store ``value`` under ``(namespace, key)``, replacing what was there.

        Args:
            namespace: A tuple of labels, e.g. ``("users", "42")``.
            key: The key in the namespace.
            value: A JSON object; its strings are what :meth:`search` matches.
            ttl: Seconds until it expires (``None``: never); a put again restarts it.
            index: With an embedding model: which fields are embedded (``None``: the pack's
                ``store.fields``, else every string; a list of dotted paths; ``False``: none).

        Raises:
            StoreError: listing every bad argument.
            ProviderError: the embedding model failed (nothing is stored).
        """
        problems = _label_problems(namespace, "namespace", allow_empty=False)
        problems += _check_key(key) + _check_value(value, ttl) + _check_index(index)
        _check("put", problems)
        vector = await self._vector(value, index)
        now = now_us()
        expires = now + int(ttl * 1_000_000) if ttl is not None else None
        column = namespace_column(namespace)
        model = self._embedder.model if vector is not None and self._embedder else None
        if self._held is None:
            return await self._store.put_item(
                self.package,
                column,
                key,
                dict(value),
                now=now,
                expires_at=expires,
                vector=vector,
                model=model,
            )
        before = await self.get(namespace, key)
        created = before.created_at if before is not None else now
        write = ItemWrite(self.package, column, key, dict(value), now, expires, vector, model)
        write.created_at = created
        self._held.record(write)
        return _held_item(write)

    async def get(self, namespace: Sequence[str], key: str) -> StoreItem | None:
        """The item under ``(namespace, key)``, or ``None`` (never put, deleted or expired)."""
        problems = _label_problems(namespace, "namespace", allow_empty=False)
        _check("get", problems + _check_key(key))
        column = namespace_column(namespace)
        now = now_us()
        held = self._held.get(self.package, column, key) if self._held is not None else None
        if held is not None:
            live = held.value is not None and (held.expires_at is None or held.expires_at > now)
            return _held_item(held) if live else None
        return await self._store.get_item(self.package, column, key, now=now)

    async def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Delete the item under ``(namespace, key)``; returns whether there was one."""
        problems = _label_problems(namespace, "namespace", allow_empty=False)
        _check("delete", problems + _check_key(key))
        column = namespace_column(namespace)
        if self._held is None:
            return await self._store.delete_item(self.package, column, key)
        existed = await self.get(namespace, key) is not None
        self._held.record(ItemWrite(self.package, column, key, None, now_us()))
        return existed

    async def search(
        self,
        namespace_prefix: Sequence[str],
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[StoreItem]:
        """Items under a namespace prefix: best matches of ``query`` first, else newest.

        Inside a tool, it sees what is committed: not the tool's own writes yet.

        Args:
            namespace_prefix: Labels every namespace searched starts with (``()``: all).
            query: With an embedding model, a text whose meaning is matched: every item with
                a vector, nearest first (``score``: the cosine similarity). Else words to match
                against the items' strings (any word; more matches, and rarer words, rank
                higher); each hit's ``score`` says how well it matched.
            filter: Fields the value must have: ``{"status": "open"}``, or with operators,
                ``{"priority": {"$gte": 2}}`` (``$eq $ne $gt $gte $lt $lte $in $nin``);
                dotted paths reach nested fields.
            limit: At most this many items (1 to 1000).
            offset: Skip this many matching items first (paging).

        Raises:
            StoreError: listing every bad argument.
            ProviderError: the embedding model failed.
        """
        problems = _label_problems(namespace_prefix, "namespace_prefix", allow_empty=True)
        if query is not None and not isinstance(query, str):
            problems.append(f"query must be a string or None, not {query!r}")
        _check("search", problems + _filter_problems(filter) + _check_limit(limit, offset))
        prefix = namespace_column(namespace_prefix)
        vector = None
        embedder = self._embedder
        if embedder is not None and query is not None and query.strip():
            vector = (await embedder.embed([query], "query"))[0]
        model = embedder.model if embedder is not None else None
        now = now_us()

        async def page(size: int, at: int) -> list[StoreItem]:
            return await self._store.search_items(
                self.package,
                prefix,
                now=now,
                query=query,
                vector=vector,
                model=model,
                limit=size,
                offset=at,
            )

        if not filter:
            return await page(limit, offset)
        found: list[StoreItem] = []
        skip, at = offset, 0
        while len(found) < limit:
            batch = await page(_BATCH, at)
            for item in batch:
                if not matches(item.value, filter):
                    continue
                if skip:
                    skip -= 1
                elif len(found) < limit:
                    found.append(item)
            if len(batch) < _BATCH:
                break
            at += _BATCH
        return found

    async def list_namespaces(
        self,
        prefix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces holding items under ``prefix``, sorted.

        Args:
            prefix: Labels they start with (``()``: every namespace).
            max_depth: Cut longer namespaces to this many labels (duplicates merged).
            limit: At most this many (1 to 1000).
            offset: Skip this many first.
        """
        problems = _label_problems(prefix, "prefix", allow_empty=True)
        if max_depth is not None and (not isinstance(max_depth, int) or max_depth < 1):
            problems.append(f"max_depth must be an integer of 1 or more, not {max_depth!r}")
        _check("list_namespaces", problems + _check_limit(limit, offset))
        columns = await self._store.item_namespaces(
            self.package, namespace_column(prefix), now=now_us()
        )
        labels = [namespace_labels(column) for column in columns]
        if max_depth is not None:
            labels = sorted({namespace[:max_depth] for namespace in labels})
        return labels[offset : offset + limit]


def _held_item(write: ItemWrite) -> StoreItem:
    """The item a held put makes (before it commits)."""
    return StoreItem(
        namespace=namespace_labels(write.namespace),
        key=write.key,
        value=dict(write.value or {}),
        created_at=write.created_at or write.now,
        updated_at=write.now,
        expires_at=write.expires_at,
    )


__all__ = [
    "MAX_LIMIT",
    "Embedder",
    "Index",
    "Namespace",
    "PackStore",
    "StoreItem",
    "embedding_text",
    "matches",
]
