"""Placement: which thread runs where.

One process alone on its database (:class:`LocalPlacement`, SQLite or a single PostgreSQL
runtime) claims a thread in its execution record (``claimed_by``) and releases the claims of the
processes that ran before it when it starts. Several workers on one PostgreSQL database share
threads through leases (:class:`~sa_core.engine.workers.leases.LeasePlacement`): owner plus expiry,
renewed by a heartbeat, taken over once expired. The engine asks the :class:`Placement` protocol and
never which of the two it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sa_core.spec import Side

if TYPE_CHECKING:
    from sa_core.engine.threads import LiveThreads
    from sa_core.store import Store


@dataclass(frozen=True, slots=True)
class Admission:
    """Where a message sent to an idle thread goes.

    Attributes:
        busy: The message queues (the thread runs, or owes a turn, elsewhere or here).
        elsewhere: Another worker holds the thread.
        holder: That worker, when known (to address the work notice to).
    """

    busy: bool
    elsewhere: bool = False
    holder: str | None = None


HERE = Admission(busy=False)
"""A message to an idle thread of a process alone: its turn runs here."""


class Placement(Protocol):
    """Which thread runs where, and the notices that go with it.

    Attributes:
        alone: Only this process writes the database: a thread it does not run is idle, and
            its claim goes in the transaction that owes the turn.
    """

    alone: bool

    async def start(self) -> None:
        """Take up placement once the runtime opened its store."""

    def run(self) -> None:
        """Start background loops once the runtime accepts work."""

    async def stop(self) -> None:
        """Give back everything this process holds."""

    async def claim(self, thread_id: str) -> bool:
        """Claim a thread before its runner's flow; False when another process runs it."""

    def release(self, thread_id: str, settled: bool) -> None:
        """A thread's runner exited (``settled``: its last flow settled cleanly)."""

    async def give_back(self, thread_id: str) -> None:
        """A runner claimed a thread and found nothing to run."""

    def handle_serves(self, thread_id: str) -> bool:
        """Whether the thread's live handle may serve a message without reading the row."""

    async def admit(self, thread_id: str) -> Admission:
        """Where a message to a thread with no runner here goes (may take its lease)."""

    def notify_work(self, thread_id: str, side: Side = "a", holder: str | None = None) -> None:
        """Tell the process that may run the thread that it has queued work."""

    def notify_stop(self, thread_id: str) -> None:
        """Ask the process that may run the thread's turn to stop it."""

    def notify_settled(self, thread_id: str) -> None:
        """Tell a call waiting on another process that a child's settle committed."""

    def notify_pushed(self, thread_id: str) -> None:
        """Wake a remote child's follower on another process (a push notification came here)."""

    def settled(self, thread_id: str) -> bool:
        """Whether this process's runner settled the thread's last turn and still holds it."""

    async def may_finish(self, thread_id: str) -> bool:
        """Whether a stop posted here records the end of the thread's execution."""

    def reread_seconds(self) -> float:
        """How long a call waiting for a child sleeps between two reads of its row at most."""


class LocalPlacement:
    """A process alone on its database: the execution record's claim says who runs a thread.

    Args:
        store: The store.
        instance_id: The name this process claims threads under.
        threads: The live handles (a handle known current serves a message).
    """

    alone = True

    def __init__(self, store: Store, instance_id: str, threads: LiveThreads) -> None:
        self.store = store
        self.instance_id = instance_id
        self.threads = threads

    async def start(self) -> None:
        """Release the claims of the processes that held them: they are gone."""
        await self.store.release_claims()

    def run(self) -> None:
        """Nothing runs in the background."""

    async def stop(self) -> None:
        """Nothing to give back (claims end with each flow)."""

    async def claim(self, thread_id: str) -> bool:
        """Claim the thread's execution record for this process."""
        return await self.store.claim_execution(thread_id, self.instance_id)

    def release(self, thread_id: str, settled: bool) -> None:
        """Nothing to do: the settlement released the claim."""

    async def give_back(self, thread_id: str) -> None:
        """Release the claim taken for nothing."""
        await self.store.release_execution(thread_id, self.instance_id)

    def handle_serves(self, thread_id: str) -> bool:
        """A live handle known to match the database serves."""
        return self.threads.is_current(thread_id)

    async def admit(self, thread_id: str) -> Admission:
        """A thread with no runner here runs here."""
        return HERE

    def notify_work(self, thread_id: str, side: Side = "a", holder: str | None = None) -> None:
        """No other process to tell."""

    def notify_stop(self, thread_id: str) -> None:
        """No other process to tell."""

    def notify_settled(self, thread_id: str) -> None:
        """No other process to tell."""

    def notify_pushed(self, thread_id: str) -> None:
        """No other process to tell."""

    def settled(self, thread_id: str) -> bool:
        """Nothing is held past a runner's exit."""
        return False

    async def may_finish(self, thread_id: str) -> bool:
        """No other process runs the thread."""
        return True

    def reread_seconds(self) -> float:
        """One second: only another process's settle is seen by reading."""
        return 1.0
