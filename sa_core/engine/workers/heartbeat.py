"""The worker's heartbeat: renew its leases every third of the expiry, notice the lost ones.

Each beat also gives back the leases kept after their runner settled for long enough, tells
whether another worker is alive (frames are relayed only then) and, every tenth beat, prunes the
relayed frames no stream can ask for any more.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from sa_core.engine.workers.relay import FRAME_RETENTION_US
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.workers.relay import RelayBus
    from sa_core.store import Store

log = logging.getLogger("sa_core.workers")


class Renewed(Protocol):
    """The leases the heartbeat renews (:class:`~sa_core.engine.workers.leases.LeasePlacement`)."""

    store: Store
    worker_id: str
    ttl: float
    ttl_us: int
    held: dict[str, int]
    relay: RelayBus

    def renewed(self, thread_id: str, expires: int) -> None:
        """The thread's lease was renewed to expire no sooner than ``expires`` (µs)."""
        ...

    def lost(self, thread_id: str) -> None:
        """Another worker took the thread over: stop running it here."""
        ...

    def end_lingering(self) -> None:
        """Give back the leases kept long enough after their runner settled."""
        ...


async def heartbeat_loop(leases: Renewed) -> None:
    """Beat every third of the lease expiry until cancelled (a failed beat is logged)."""
    store = leases.store
    beats = 0
    while True:
        await asyncio.sleep(leases.ttl / 3)
        try:
            leases.end_lingering()
            held = dict(leases.held)
            before = now_us()  # the renewed leases expire no sooner than ttl after this
            renewed = set(await store.heartbeat(leases.worker_id, leases.ttl_us, list(held)))
            for thread_id, token in held.items():
                if leases.held.get(thread_id) != token:
                    continue  # released or acquired again meanwhile
                if thread_id in renewed:
                    leases.renewed(thread_id, before + leases.ttl_us)
                else:
                    leases.lost(thread_id)
            beats += 1
            leases.relay.peers = len(await store.live_workers(leases.ttl_us)) > 1
            if beats % 10 == 0:
                await store.prune_stream_frames(FRAME_RETENTION_US)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker heartbeat failed")
