"""The engine's half of a thread, and the live handles of the threads this process knows.

A thread as code running on it sees it is a ``ThreadState``, a facade. The
engine never sees that facade's insides: it works on a :class:`ThreadRef` (the stored row and
child registry every handle of the thread shares, plus what one handle carries while a turn, a
tool or an effect runs on it) and on the :class:`~sa_core.engine.kernel.Kernel`.

:class:`LiveThreads` is the one owner of the live-handle cache: which threads have a handle
open in this process (weakly: a handle nobody holds is dropped), whether a handle is known to
match the database, and what the transaction owing a turn read for that turn's runner.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.engine.flowtypes import RunningFlow
    from sa_core.spec import Message, PromptDefinition, SubagentRegistryEntry
    from sa_core.store import Store, ThreadRow, Transaction
    from sa_core.store.packitems import StoreWrites

NO_TOOL_OPTIONS: Mapping[str, Any] = MappingProxyType({})
"""``state.tool_options`` when a tool is given none."""

KEPT_HANDLES = 1024
"""Live handles of threads whose lease this worker keeps after a turn, kept at most (the
newest; see :meth:`LiveThreads.keep`)."""


class SharedThread:
    """What every live handle of one thread shares: the row and the child registry."""

    __slots__ = ("__weakref__", "children", "row")

    def __init__(self, row: ThreadRow, children: list[SubagentRegistryEntry]) -> None:
        self.row = row
        self.children = children


class ThreadRef:
    """One handle of a thread, as the engine holds it.

    Attributes:
        shared: The row and child registry every handle of the thread shares.
        thread_id: The thread's id (a plain attribute: read on every write of a turn).
        prompt: The prompt in effect (the one the current step runs), else ``None``.
        tool_env: While a prompt's tool config applies: its ``env``.
        tool_options: While a tool runs: the ``options`` of the tools entry that offered it.
        tool_call_id: While a tool runs: the id of its call.
        tool_attempt: While a tool runs: 1, or 2 when a restart interrupted the first run.
        store_writes: While a tool runs: its writes to the pack's store, held until they
            commit with its result (:func:`sa_core.engine.tools.toolrows.store_tool_row`).
        effect_attempt: While an effect runs: 1, or 2 when a restart interrupted the first.
        execution: The flow this handle runs in, else ``None`` (outside a turn).
        own_context: The scratch dict of a handle outside a flow.
        facade: The facade user code got for this handle, while it lives (weakly: the facade
            holds the handle, not the other way round).
    """

    __slots__ = (
        "effect_attempt",
        "execution",
        "facade",
        "own_context",
        "prompt",
        "shared",
        "store_writes",
        "tool_attempt",
        "tool_call_id",
        "tool_env",
        "thread_id",
        "tool_options",
    )

    def __init__(self, shared: SharedThread, flow: RunningFlow | None = None) -> None:
        self.shared = shared
        self.thread_id: str = shared.row.id
        self.prompt: PromptDefinition | None = None
        self.tool_env: Mapping[str, str] = {}
        self.tool_options: Mapping[str, Any] = NO_TOOL_OPTIONS
        self.tool_call_id: str | None = None
        self.tool_attempt = 1
        self.store_writes: StoreWrites | None = None
        self.effect_attempt: int | None = None
        self.execution: RunningFlow | None = flow
        self.own_context: dict[str, Any] = {}
        self.facade: weakref.ref[Any] | None = None

    @property
    def row(self) -> ThreadRow:
        """The thread's stored record (shared by every handle of the thread)."""
        return self.shared.row

    @property
    def children(self) -> list[SubagentRegistryEntry]:
        """The child registry (shared by every handle of the thread)."""
        return self.shared.children

    @property
    def context(self) -> dict[str, Any]:
        """The scratch dict of the flow this handle runs in, else the handle's own."""
        flow = self.execution
        return flow.context if flow is not None else self.own_context


@contextlib.contextmanager
def tool_config(
    thread: ThreadRef, env: Mapping[str, str], options: Mapping[str, Any] = NO_TOOL_OPTIONS
) -> Iterator[None]:
    """Within the block a prompt's tool config applies to the thread: ``env`` and options."""
    previous = thread.tool_env, thread.tool_options
    thread.tool_env, thread.tool_options = env, options
    try:
        yield
    finally:
        thread.tool_env, thread.tool_options = previous


def copy_row(target: ThreadRow, row: ThreadRow, keep: tuple[str, ...] = ()) -> None:
    """Make ``target`` hold ``row``'s values (but for the fields in ``keep``)."""
    for item in dataclasses.fields(row):
        if item.name not in keep:
            setattr(target, item.name, getattr(row, item.name))


class LiveThreads:
    """The live handles of one runtime's threads, and whether each matches the database.

    In-process writers update the live row and registry with the store (see
    :meth:`update_child`), so a live handle read, created or refreshed while the store's
    external version was ``v`` is still what the database holds as long as no other connection
    has committed since (the version is still ``v``). A backend that cannot tell (``None``,
    PostgreSQL) never marks a handle current.

    Args:
        store: The store the handles mirror.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._live: weakref.WeakValueDictionary[str, SharedThread] = weakref.WeakValueDictionary()
        self._current: weakref.WeakKeyDictionary[SharedThread, int] = weakref.WeakKeyDictionary()
        self._kept: OrderedDict[str, SharedThread] = OrderedDict()
        self._fresh: set[str] = set()
        self._primed_history: dict[str, list[Message]] = {}

    # -- reading the cache --------------------------------------------------------------------

    def get(self, thread_id: str) -> SharedThread | None:
        """The handle every live handle of a thread shares, or None when none is open."""
        return self._live.get(thread_id)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, thread_id: object) -> bool:
        return thread_id in self._live

    def live_row(self, thread_id: str) -> ThreadRow | None:
        """The row live handles of a thread share (their view of it), or None when none is open."""
        shared = self._live.get(thread_id)
        return shared.row if shared is not None else None

    def parent_of(self, thread_id: str) -> str | None:
        """The parent of a live thread (None when not live or top level)."""
        shared = self._live.get(thread_id)
        return shared.row.parent_id if shared is not None else None

    def is_current(self, thread_id: str) -> bool:
        """Whether the thread's live handle is known to match the database.

        Call inside a write transaction: no other connection can commit until it ends.
        """
        shared = self._live.get(thread_id)
        if shared is None:
            return False
        version = self._current.get(shared)
        return version is not None and version == self.store.external_version()

    # -- opening handles ----------------------------------------------------------------------

    def add(self, row: ThreadRow, version: int | None) -> SharedThread:
        """The handle of a thread just created (no children yet), current at ``version``."""
        shared = SharedThread(row, [])
        self._live[row.id] = shared
        self.mark_current(shared, version)
        return shared

    async def shared_for(
        self,
        row: ThreadRow,
        *,
        read_at: int | None = None,
        children: list[SubagentRegistryEntry] | None = None,
    ) -> SharedThread:
        """The shared handle of a stored thread row (the live one, brought up to ``row``).

        Args:
            row: The thread's row, as read from the store.
            read_at: The store's external version taken before ``row`` was read (lets the
                next turn start without reading the row and registry again); ``None`` when
                unknown.
            children: The thread's registry, read with ``row`` (not read again).
        """
        shared = self._live.get(row.id)
        if shared is not None and read_at is not None and self._current.get(shared) == read_at:
            # the live registry matched the database at ``read_at`` and nothing was committed
            # elsewhere before ``row`` was read: only the row is new
            if shared.row is not row:
                copy_row(shared.row, row)
            return shared
        if children is None:
            children = await self.store.list_children(row.id)
        if shared is None:
            shared = SharedThread(row, children)
            self._live[row.id] = shared
        else:
            if shared.row is not row:
                copy_row(shared.row, row)
            shared.children = children
        self.mark_current(shared, read_at)
        return shared

    async def read(
        self, thread_id: str
    ) -> tuple[int | None, ThreadRow | None, list[SubagentRegistryEntry] | None]:
        """A thread's row, with the store's external version taken before reading it.

        Without a version (PostgreSQL) the live registry cannot be known current, so it is read
        with the row in the same statement; otherwise it is left to :meth:`shared_for`.
        """
        version = self.store.external_version()  # before the reads
        if version is not None:
            return version, await self.store.get_thread(thread_id), None
        found = await self.store.get_thread_with_children(thread_id)
        return (None, *found) if found is not None else (None, None, None)

    # -- keeping handles current --------------------------------------------------------------

    def mark_current(self, shared: SharedThread, version: int | None) -> None:
        """Record that ``shared`` matched the database at ``version`` (``None``: unknown)."""
        if version is None:
            self._current.pop(shared, None)
        else:
            self._current[shared] = version

    def forget_current(self, thread_id: str) -> None:
        """The thread's live handle may differ from the database (a write rolled back)."""
        shared = self._live.get(thread_id)
        if shared is not None:
            self.mark_current(shared, None)

    async def refresh(self, thread_id: str, tx: Transaction) -> bool:
        """Re-read a live thread's row and registry in ``tx``; False when it is not live."""
        if thread_id not in self._live:
            return False
        found = await self.store.get_thread_with_children(thread_id, tx=tx)
        return found is not None and self.adopt(thread_id, *found)

    def adopt(
        self,
        thread_id: str,
        row: ThreadRow,
        children: list[SubagentRegistryEntry],
        *,
        keep: tuple[str, ...] = (),
    ) -> bool:
        """Make a live thread's handle the row and registry just read; False when not live.

        Args:
            thread_id: The thread.
            row: Its row as read.
            children: Its registry as read.
            keep: Fields whose live values stay (the reading transaction wrote them, and its
                read may predate its own writes).
        """
        shared = self._live.get(thread_id)
        if shared is None:
            return False
        copy_row(shared.row, row, keep)
        shared.children = children
        self.mark_current(shared, self.store.external_version())
        return True

    async def update_child(self, parent_id: str, reference: str, **fields: Any) -> None:
        """Update a registry entry in the store and in every live handle of the parent.

        Inside a write transaction, a parent handle known to match the database gives the
        entry as stored: it is not read back.
        """
        shared = self._live.get(parent_id)
        current = None
        if shared is not None and self.store.in_transaction() and self.is_current(parent_id):
            current = next((e for e in shared.children if e.reference == reference), None)
        updated = await self.store.update_child(parent_id, reference, current=current, **fields)
        if shared is not None:
            shared.children = [
                (updated or e.model_copy(update=fields)) if e.reference == reference else e
                for e in shared.children
            ]

    def keep(self, thread_id: str) -> None:
        """Hold a settled thread's live handle for its next message (the newest few)."""
        shared = self._live.get(thread_id)
        if shared is None:
            return
        kept = self._kept
        kept[thread_id] = shared
        kept.move_to_end(thread_id)
        while len(kept) > KEPT_HANDLES:
            kept.popitem(last=False)

    # -- what the transaction owing a turn read for its runner ------------------------------

    def prime(self, thread_id: str, history: list[Message] | None) -> None:
        """The thread's handle was written or re-read with its owed turn (and its history)."""
        self._fresh.add(thread_id)
        if history is not None:
            self._primed_history[thread_id] = history

    def take_primed(self, thread_id: str) -> tuple[SharedThread | None, list[Message] | None]:
        """The handle and history read for the thread's runner, if any (clears both)."""
        shared = self._live.get(thread_id) if thread_id in self._fresh else None
        self._fresh.discard(thread_id)
        history = self._primed_history.pop(thread_id, None)
        return shared, (history if shared is not None else None)

    # -- handles of threads -------------------------------------------------------------------

    async def open(self, thread_id: str) -> ThreadRef | None:
        """A handle of a stored thread (sharing the live one), or None when there is none."""
        version, row, children = await self.read(thread_id)
        if row is None:
            return None
        return ThreadRef(await self.shared_for(row, read_at=version, children=children))

    async def parent(self, thread: ThreadRef) -> ThreadRef | None:
        """A handle of a thread's parent, or None for a top-level thread (or a deleted parent)."""
        parent_id = thread.shared.row.parent_id
        if parent_id is None:
            return None
        row = await self.store.get_thread(parent_id)
        return None if row is None else await self.ref_for(row)

    async def child(self, thread: ThreadRef, reference: str) -> ThreadRef | None:
        """A handle of a thread's child by its reference (None unless it is that thread's)."""
        row = await self.store.get_thread(reference)
        if row is None or row.parent_id != thread.thread_id:
            return None
        return await self.ref_for(row)

    async def ref_for(
        self,
        row: ThreadRow,
        flow: RunningFlow | None = None,
        *,
        read_at: int | None = None,
        children: list[SubagentRegistryEntry] | None = None,
    ) -> ThreadRef:
        """A handle over a stored thread row (see :meth:`shared_for`), running ``flow``."""
        shared = await self.shared_for(row, read_at=read_at, children=children)
        return ThreadRef(shared, flow)
