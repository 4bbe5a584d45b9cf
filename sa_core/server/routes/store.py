"""A package's store (``state.store``) over HTTP: put, get, delete, search, list namespaces.

Namespaces are JSON arrays of strings in bodies (``["users", "42"]``) and repeated ``namespace``
query parameters in URLs (``?namespace=users&namespace=42&key=prefs``).
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, delete, get, post, put
from litestar.params import JSONBody, QueryParameter
from msgspec import Meta

from sa_core.errors import ProviderError, StoreError
from sa_core.memory import MAX_LIMIT, PackStore, StoreItem
from sa_core.server.auth import READ_BY_NATURE
from sa_core.server.context import PackDep, RuntimeDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import Base

Label = Annotated[str, Meta(min_length=1, max_length=200)]
Labels = Annotated[list[Label], Meta(max_length=20)]
NamespaceQuery = Annotated[
    list[str], QueryParameter(description="The namespace, one label per parameter.")
]
KeyQuery = Annotated[str, QueryParameter(min_length=1, max_length=200, description="The key.")]


class ItemIn(Base, kw_only=True):
    """``PUT store/items``: store ``value`` under ``(namespace, key)``, replacing what was there."""

    namespace: Annotated[list[Label], Meta(min_length=1, max_length=20)]
    key: Label
    value: dict[str, Any]
    ttl: Annotated[float, Meta(gt=0)] | None = None
    """Seconds until the item expires (none: never)."""


class SearchIn(Base, kw_only=True):
    """``POST store/items/search``."""

    namespace_prefix: Labels = []
    query: Annotated[str, Meta(max_length=2000)] | None = None
    """Words matched against the items' strings; best matches first."""
    filter: dict[str, Any] | None = None
    """Fields the value must have: ``{"kind": "note"}`` or ``{"stars": {"$gte": 4}}``."""
    limit: Annotated[int, Meta(ge=1, le=MAX_LIMIT)] = 10
    offset: Annotated[int, Meta(ge=0, le=1_000_000_000)] = 0


class NamespacesIn(Base, kw_only=True):
    """``POST store/namespaces``."""

    prefix: Labels = []
    max_depth: Annotated[int, Meta(ge=1, le=100)] | None = None
    limit: Annotated[int, Meta(ge=1, le=MAX_LIMIT)] = 100
    offset: Annotated[int, Meta(ge=0, le=1_000_000_000)] = 0


class ItemOut(Base, kw_only=True):
    """An item (times in microseconds since the epoch)."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    expires_at: int | None
    score: float | None
    """How well it matched a search's query (higher is better)."""


class ItemsOut(Base, kw_only=True):
    """``POST store/items/search``."""

    items: list[ItemOut]


class NamespacesOut(Base, kw_only=True):
    """``POST store/namespaces``."""

    namespaces: list[list[str]]


def item_out(item: StoreItem) -> ItemOut:
    """Describe an item."""
    return ItemOut(
        namespace=list(item.namespace),
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        expires_at=item.expires_at,
        score=item.score,
    )


def _invalid(exc: StoreError) -> ApiError:
    problems = [{"message": problem} for problem in exc.problems]
    return ApiError(422, "invalid_store_request", str(exc), errors=problems)


def _embedding_failed(exc: ProviderError) -> ApiError:
    return ApiError(502, "embedding_failed", f"The pack's embedding model failed: {exc}")


def _not_found(pack: str, namespace: list[str], key: str) -> ApiError:
    return ApiError(
        404,
        "item_not_found",
        f"Package '{pack}' has no item {key!r} in namespace {namespace!r} (or it expired).",
    )


class StoreController(Controller):
    """The store of one package."""

    path = "/store"

    @put("/items", responses=errors(422, 502), summary="Put a store item")
    async def put_item(self, data: JSONBody[ItemIn], pack: PackDep, runtime: RuntimeDep) -> ItemOut:
        """Store a JSON object under a namespace and a key (every thread of the package sees it)."""
        try:
            item = await runtime.pack_store(pack.package).put(
                tuple(data.namespace), data.key, data.value, ttl=data.ttl
            )
        except StoreError as exc:
            raise _invalid(exc) from None
        except ProviderError as exc:
            raise _embedding_failed(exc) from None
        return item_out(item)

    @get("/items", responses=errors(404, 422), summary="Get a store item")
    async def get_item(
        self,
        pack: PackDep,
        runtime: RuntimeDep,
        namespace: NamespaceQuery,
        key: KeyQuery,
    ) -> ItemOut:
        """The item under ``namespace`` and ``key``; 404 when there is none or it expired."""
        try:
            item = await runtime.pack_store(pack.package).get(tuple(namespace), key)
        except StoreError as exc:
            raise _invalid(exc) from None
        if item is None:
            raise _not_found(pack.package, namespace, key)
        return item_out(item)

    @delete("/items", responses=errors(404, 422), summary="Delete a store item")
    async def delete_item(
        self,
        pack: PackDep,
        runtime: RuntimeDep,
        namespace: NamespaceQuery,
        key: KeyQuery,
    ) -> None:
        """Delete the item under ``namespace`` and ``key`` (204; 404 when there is none)."""
        try:
            deleted = await runtime.pack_store(pack.package).delete(tuple(namespace), key)
        except StoreError as exc:
            raise _invalid(exc) from None
        if not deleted:
            raise _not_found(pack.package, namespace, key)

    @post(
        "/items/search",
        status_code=200,
        responses=errors(422, 502),
        summary="Search the store",
        opt={READ_BY_NATURE: True},  # a read-only key may search
    )
    async def search_items(
        self, data: JSONBody[SearchIn], pack: PackDep, runtime: RuntimeDep
    ) -> ItemsOut:
        """Search items under a namespace prefix, best matches of ``query`` first.

        Without a query the most recently put come first; ``filter`` keeps the items whose
        value has the given fields.
        """
        store: PackStore = runtime.pack_store(pack.package)
        try:
            items = await store.search(
                tuple(data.namespace_prefix),
                query=data.query,
                filter=data.filter,
                limit=data.limit,
                offset=data.offset,
            )
        except StoreError as exc:
            raise _invalid(exc) from None
        except ProviderError as exc:
            raise _embedding_failed(exc) from None
        return ItemsOut(items=[item_out(item) for item in items])

    @post(
        "/namespaces",
        status_code=200,
        responses=errors(422),
        summary="List store namespaces",
        opt={READ_BY_NATURE: True},  # a read-only key may list them
    )
    async def list_namespaces(
        self, data: JSONBody[NamespacesIn], pack: PackDep, runtime: RuntimeDep
    ) -> NamespacesOut:
        """The namespaces holding items under ``prefix`` (cut to ``max_depth`` labels), sorted."""
        try:
            found = await runtime.pack_store(pack.package).list_namespaces(
                tuple(data.prefix), data.max_depth, data.limit, data.offset
            )
        except StoreError as exc:
            raise _invalid(exc) from None
        return NamespacesOut(namespaces=[list(namespace) for namespace in found])
