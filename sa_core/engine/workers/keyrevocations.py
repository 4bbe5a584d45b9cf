"""API keys stay cached on PostgreSQL only while this worker hears their revocations.

A revocation committed by any worker is notified on :data:`~sa_core.store.apikeys.KEYS_CHANNEL`;
the store's key cache is valid for the revocations heard so far
(:meth:`~sa_core.store.apikeys.ApiKeysMixin.key_revoked`). Once the listening connection is gone
nothing is heard any more, so nothing is cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.store.apikeys import KEYS_CHANNEL

if TYPE_CHECKING:
    from sa_core.store import Store


async def listen_for_revocations(listen: Any, store: Store) -> None:
    """Hear the revocations on ``listen`` (an asyncpg connection) and cache keys meanwhile."""

    def revoked(_conn: Any, _pid: int, _channel: str, _payload: str) -> None:
        store.key_revoked()

    def lost(_conn: Any) -> None:
        store.revocations_unheard()

    await listen.add_listener(KEYS_CHANNEL, revoked)
    listen.add_termination_listener(lost)
    store.revocations_heard()
