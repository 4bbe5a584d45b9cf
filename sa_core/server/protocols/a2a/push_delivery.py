"""Sending our A2A tasks' push notifications: durably, with retries, from any worker.

A notification is owed (a row of ``a2a_push``, :mod:`sa_core.store.a2apush`) when a task with
a push-notification config enters a new state; it is queued in the database, by whichever
process sees the change first:

* the process running the task's executor, as the SDK reports each event
  (:class:`~sa_core.server.protocols.a2a.push_store.DurablePushSender`);
* any process reading the task again from its thread (``tasks/get``, and the sweep below):
  the new state and the owed notification commit together.

Every ``sa serve`` process runs one :class:`PushDelivery` loop. Each round it

1. **sweeps**: reads again each watched task (one with a config and no final state yet) whose
   thread is idle and changed since it was last read, unless its executor runs here (it
   reports by itself): a turn that finished after a restart, or on a worker whose executor
   died, is noticed so;
2. **sends** what is due: it claims each owed notification (one sender at a time, across
   workers), POSTs the task as stored now (a ``StreamResponse`` JSON, ``{"task": {...}}``)
   to the config's URL with its token in ``X-A2A-Notification-Token`` (and its
   ``authentication`` as ``Authorization``), and settles it: a 2xx answer delivers it; no
   answer, 408, 429 or 5xx retries it after :func:`retry_seconds` (1 s, doubling up to 5
   minutes, :data:`MAX_ATTEMPTS` times in all); another 4xx gives it up.

The loop wakes when a notification is queued in this process, or after
:func:`sweep_seconds` while any task is watched or any notification owed. With nothing in
use, a process alone on its database (SQLite) sleeps until a config is registered here; one
sharing it (PostgreSQL) looks again every :data:`IDLE_ROUNDS` sweeps (another worker may
have left work behind).

Nothing here imports the A2A SDK (the URL check does, when a URL is checked): a server whose
A2A endpoints are never used does not load it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sa_core.remote_http import new_client
from sa_core.server.protocols.a2a.taskids import task_key
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.runtime import Runtime
    from sa_core.store import Store
    from sa_core.store.a2apush import PushRow

SWEEP = "SA_A2A_PUSH_SWEEP_SECONDS"
"""How often (seconds) watched tasks are read again and owed notifications looked for (2)."""
RETRY = "SA_A2A_PUSH_RETRY_SECONDS"
"""The first retry delay (seconds, 1); each further one doubles, up to :data:`MAX_RETRY`."""
ALLOW_PRIVATE = "SA_A2A_PUSH_ALLOW_PRIVATE"
"""Set to ``1`` to allow push URLs on loopback and private networks (refused by default)."""
TOKEN_HEADER = "X-A2A-Notification-Token"
MAX_ATTEMPTS = 10
MAX_RETRY = 300.0
SEND_SECONDS = 10.0
CLAIM_SECONDS = 60.0
"""How long a sender holds a notification it is sending (then another may send it)."""
CONCURRENT_SENDS = 16
IDLE_ROUNDS = 5
"""With nothing in use, a worker sharing its database looks again after this many sweeps."""

log = logging.getLogger("sa_core.a2a.push")
Refresh = Callable[[str, str], Awaitable[None]]
"""``refresh(task_id, thread_id)``: read a task again from its thread, queueing what it owes."""


def _seconds(name: str, default: float) -> float:
    try:
        return max(float(os.environ.get(name, default)), 0.05)
    except ValueError:
        return default


def sweep_seconds() -> float:
    """How often watched tasks are read again (``SA_A2A_PUSH_SWEEP_SECONDS``, 2 s)."""
    return _seconds(SWEEP, 2.0)


def retry_seconds(attempts: int) -> float:
    """The delay before the next try after ``attempts`` failed ones (1 s, doubling)."""
    return float(min(_seconds(RETRY, 1.0) * 2 ** max(attempts - 1, 0), MAX_RETRY))


def allows_private() -> bool:
    """Whether push URLs may name loopback or private hosts (``SA_A2A_PUSH_ALLOW_PRIVATE``)."""
    return os.environ.get(ALLOW_PRIVATE, "").strip().lower() in ("1", "true", "yes", "on")


async def url_allowed(url: str) -> bool:
    """Whether notifications may be sent to ``url``: http(s), and (by default) a public host.

    A host on loopback, a private or link-local network (a cloud's metadata service, say) is
    refused unless ``SA_A2A_PUSH_ALLOW_PRIVATE=1``: any client with an API key could
    otherwise make this server POST into its own network. Checked when a config is
    registered and again before each send (the name may resolve elsewhere by then).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if allows_private():
        return True
    from a2a.utils.push_url_validator import validate_push_notification_url

    return await validate_push_notification_url(url)


def where(url: str) -> str:
    """``scheme://host:port`` of a URL (what logs show: never its path or query)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def notification_headers(config: dict[str, Any]) -> dict[str, str]:
    """The headers a config asks for: its token, and its ``authentication`` if any."""
    headers = {"Content-Type": "application/json"}
    if config.get("token"):
        headers[TOKEN_HEADER] = str(config["token"])
    auth = config.get("authentication") or {}
    if auth.get("scheme") and auth.get("credentials"):
        headers["Authorization"] = f"{auth['scheme']} {auth['credentials']}"
    return headers


class PushDelivery:
    """The notification loop of one runtime (see the module docstring).

    Args:
        runtime: The runtime whose store holds the notifications.
        refresh: Reads a task again from its thread and queues what it owes (the A2A
            server's, which loads the SDK on first use).
        live: Whether a task's executor runs in this process.
    """

    def __init__(self, runtime: Runtime, refresh: Refresh, live: Callable[[str], bool]) -> None:
        self.runtime = runtime
        self.refresh = refresh
        self.live = live
        self.sent = 0
        """Notifications delivered by this process (for tests and logs)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(CONCURRENT_SENDS)
        self._client: Any = None

    @property
    def store(self) -> Store:
        """The runtime's store."""
        return self.runtime.store

    def start(self) -> None:
        """Start the loop (once the runtime is open)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="sa-a2a-push")

    def wake(self) -> None:
        """Look now: a notification was queued, or a config registered, in this process."""
        self._wake.set()

    async def aclose(self) -> None:
        """Stop the loop and the sends in flight (their claims expire; they are sent later)."""
        tasks = [t for t in (self._task, *self._sends) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _loop(self) -> None:
        shared = not self.runtime.kernel.placement.alone  # other workers may leave work
        if not shared:  # alone: whoever claimed a send before is gone
            with contextlib.suppress(Exception):
                await self.store.release_push_claims()
        busy = True
        while True:
            try:
                busy = await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:  # a database blip must not end the loop
                log.exception("A2A push notifications: a round failed")
            idle = IDLE_ROUNDS * sweep_seconds() if shared else None
            timeout = await self._pause() if busy else idle
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()

    async def _pause(self) -> float:
        """Until the next round: the sweep interval, or sooner when a retry is due."""
        pause = sweep_seconds()
        with contextlib.suppress(Exception):
            due = await self.store.next_push_at()
            if due is not None:
                pause = min(pause, max((due - now_us()) / 1e6, 0.0))
        return pause

    async def _round(self) -> bool:
        """Sweep the watched tasks, send what is due; whether anything is in use."""
        for task_id, thread_id, changed_at in await self.store.watched_pushes():
            if self.live(task_id):
                continue  # its executor reports every event
            try:
                await self.refresh(task_id, thread_id)
            except Exception:  # one task's trouble must not hold up the others
                log.exception("A2A push notifications: reading task %s failed", task_id)
                continue
            await self.store.saw_push_task(task_id, changed_at)
        until = now_us() + int(CLAIM_SECONDS * 1e6)
        for row in await self.store.due_pushes():
            if await self.store.claim_push(row, until):
                await self._slots.acquire()
                task = asyncio.create_task(self._deliver(row))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)
        return await self.store.pushes_in_use()

    async def _deliver(self, row: PushRow) -> None:
        """Send one claimed notification and settle it."""
        try:
            error, retry = await self._post(row)
            if error is None:
                self.sent += 1
                await self.store.settle_push(row)
                return
            if retry and row.attempts + 1 < MAX_ATTEMPTS:
                at = now_us() + int(retry_seconds(row.attempts + 1) * 1e6)
                await self.store.settle_push(row, error=error, retry_at=at)
                self.wake()  # recompute the pause
            else:
                log.warning(
                    "A2A push notification for task %s to %s given up: %s",
                    row.task_id,
                    where(str(row.config.get("url", ""))),
                    error,
                )
                await self.store.settle_push(row, error=error)
        except asyncio.CancelledError:
            raise
        except Exception:  # its claim expires: another round sends it
            log.exception("A2A push notification for task %s failed", row.task_id)
        finally:
            self._slots.release()

    async def _post(self, row: PushRow) -> tuple[str | None, bool]:
        """POST the notification: ``(None, _)`` when delivered, else ``(error, retry?)``."""
        url = str(row.config.get("url") or "")
        located = task_key(row.task_id)
        task = await self.store.get_value(*located) if located else None
        if not isinstance(task, dict):
            return "the task is gone", False
        if not await url_allowed(url):
            return f"the URL {where(url)} is not allowed", False
        if self._client is None:
            self._client = new_client({}, SEND_SECONDS, SEND_SECONDS)
        try:
            response = await self._client.post(
                url, json={"task": task}, headers=notification_headers(row.config)
            )
        except Exception as exc:  # unreachable, timed out: try again later
            return f"{type(exc).__name__}: {where(url)} did not answer", True
        status = int(response.status_code)
        if 200 <= status < 300:
            return None, False
        return f"HTTP {status}", status in (408, 429) or status >= 500


__all__ = [
    "ALLOW_PRIVATE",
    "MAX_ATTEMPTS",
    "RETRY",
    "SWEEP",
    "TOKEN_HEADER",
    "PushDelivery",
    "notification_headers",
    "retry_seconds",
    "sweep_seconds",
    "url_allowed",
]
