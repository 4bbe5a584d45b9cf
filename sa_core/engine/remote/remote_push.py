"""Push notifications from remote A2A agents: a per-task token, and waking the task's follower.

When this server has a public URL (``sa serve --public-url``, the ``SA_PUBLIC_URL`` variable)
and a remote agent's card says it pushes, each exchange registers a push-notification config
with its message: the URL ``<public URL>/a2a/_push/<child thread id>`` and a fresh random
token. The token's SHA-256 goes in the child's record (:mod:`sa_core.engine.remote.remote_record`),
never the token itself. A notification is accepted only with that token in
``X-A2A-Notification-Token`` (:func:`notified`); it carries no trust beyond "look now": the
follower then reads the task with ``tasks/get`` from the agent itself.

While push is registered, a follower without a stream waits for a notification instead of
polling every few seconds, and polls only every :func:`push_poll_seconds` as a safety net. A
notification for a child whose runner is not in this process starts it when it owes work (a
restart, say), so push is also a way back to an unfinished exchange. With several workers
(PostgreSQL), a notification received by a worker that does not follow the task is relayed to
the others (``pushed`` on the workers' ``sa_work`` channel): the follower, wherever it runs,
wakes at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import secrets
import weakref
from typing import TYPE_CHECKING

from sa_core.engine.owed import ensure_running
from sa_core.engine.remote.remote_record import load

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel

PUBLIC_URL = "SA_PUBLIC_URL"
"""The variable holding the server's public base URL (set by ``sa serve --public-url``)."""
PUSH_POLL = "SA_A2A_PUSH_POLL_SECONDS"
"""The variable setting how often a task followed by push is still polled (seconds)."""
DEFAULT_PUSH_POLL = 60.0
PUSH_PATH = "/a2a/_push/"
"""Where notifications are received: ``PUSH_PATH + <child thread id>``."""

_WAKES: weakref.WeakKeyDictionary[Kernel, dict[str, asyncio.Event]] = weakref.WeakKeyDictionary()


def public_url(kernel: Kernel) -> str | None:
    """The server's public base URL, if it has one (the instance env, then the process's)."""
    url = kernel.env.get(PUBLIC_URL) or os.environ.get(PUBLIC_URL)
    return url.rstrip("/") if url else None


def push_poll_seconds() -> float:
    """How often a task followed by push is polled anyway (60 s unless set)."""
    try:
        return max(float(os.environ.get(PUSH_POLL, DEFAULT_PUSH_POLL)), 0.1)
    except ValueError:
        return DEFAULT_PUSH_POLL


def new_token() -> tuple[str, str]:
    """A fresh notification token and its SHA-256 (what the record keeps)."""
    token = secrets.token_urlsafe(32)
    return token, digest(token)


def digest(token: str) -> str:
    """The SHA-256 of a token, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def push_target(kernel: Kernel, thread_id: str) -> str | None:
    """The notification URL of a child, when this server has a public URL."""
    base = public_url(kernel)
    return f"{base}{PUSH_PATH}{thread_id}" if base else None


def waker(kernel: Kernel, thread_id: str) -> asyncio.Event:
    """The event a notification for this child sets (registered while a follower waits)."""
    return _WAKES.setdefault(kernel, {}).setdefault(thread_id, asyncio.Event())


def forget(kernel: Kernel, thread_id: str) -> None:
    """The follower is done: notifications no longer wake anything here."""
    _WAKES.get(kernel, {}).pop(thread_id, None)


async def notified(kernel: Kernel, thread_id: str, token: str) -> bool:
    """Accept a notification for a child if its token is the one registered; wake its follower.

    Returns:
        Whether the token matched (a wrong token, an unknown child or one without a registered
        push config: False, and nothing happens).
    """
    if not token or len(thread_id) > 100:
        return False
    record = await load(kernel, thread_id)
    if not record.push_hash or not hmac.compare_digest(record.push_hash, digest(token)):
        return False
    if not wake(kernel, thread_id):
        kernel.placement.notify_pushed(thread_id)  # followed by another worker: wake it there
        await ensure_running(kernel, thread_id)  # followed nowhere: resume it if it owes work
    return True


def wake(kernel: Kernel, thread_id: str) -> bool:
    """Wake the child's follower if it runs in this process; whether it does."""
    event = _WAKES.get(kernel, {}).get(thread_id)
    if event is not None:
        event.set()
    return event is not None


__all__ = [
    "PUBLIC_URL",
    "PUSH_PATH",
    "forget",
    "new_token",
    "notified",
    "public_url",
    "push_poll_seconds",
    "push_target",
    "wake",
    "waker",
]
