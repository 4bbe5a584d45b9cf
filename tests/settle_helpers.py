"""Test helpers: hold a runtime's settlement of a turn, and note what it queues."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sa_core import Runtime
from sa_core.engine.turn import running


def hold_settlement(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the runtime's next settlements wait: ``(settling, go_on)``.

    ``settling`` is set once a turn took its last step and its settlement began (inside the
    settling transaction); the settlement goes on once the test sets ``go_on``.
    """
    settling, go_on = asyncio.Event(), asyncio.Event()
    settle = running.write_settlement

    async def held_settle(*args: Any) -> None:
        settling.set()
        await go_on.wait()
        await settle(*args)

    monkeypatch.setattr(running, "write_settlement", held_settle)
    return settling, go_on


def note_enqueued(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread ids of every queue entry the runtime's store writes from now on."""
    queued: list[str] = []
    enqueue = runtime.store.enqueue

    async def noted(thread_id: str, entry: Any, **kwargs: Any) -> str:
        queued.append(thread_id)
        return await enqueue(thread_id, entry, **kwargs)

    monkeypatch.setattr(runtime.store, "enqueue", noted)
    return queued
