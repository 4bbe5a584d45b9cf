"""The durable thread behind an AG-UI ``threadId``, and what of the client's messages it holds.

A ``threadId`` that is the id of a top-level thread of the agent (one made through the HTTP API,
say, with the variables it needs) is that thread. Any other is the client's own id (AG-UI
clients make a UUID per conversation): its first run creates a thread of the agent (tagged
``ag-ui``) and keeps the id on it as the value ``sa:ag-ui:thread:<threadId>``, an indexed
row of the database, so later runs, after a restart and on any worker, find the same thread.
The id of another agent's or another package's thread is, to this agent, a client id like any
other: it starts a thread of its own and never reaches the other one.

Clients send the whole conversation on every run. The thread holds the messages it stored
(the ids this server streamed are theirs) and remembers the ids of the client's messages it
took in (value ``sa:ag-ui:messages``, the latest :data:`KEEP_IDS`); what follows the last
message it holds is new (:func:`new_messages`).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence

from sa_core.errors import ThreadNotFoundError
from sa_core.runtime import Runtime
from sa_core.server.protocols.agui.inputs import Said
from sa_core.state import ThreadState

TAG = "ag-ui"
"""Every thread this protocol creates carries this tag."""
THREAD_KEY = "sa:ag-ui:thread:"
"""Prefix of the value naming the client's ``threadId`` on the thread it created."""
IDS_KEY = "sa:ag-ui:messages"
"""The value listing the ids of the client's messages the thread took in."""
KEEP_IDS = 200
"""How many of those ids are kept: the newest (a client's new messages follow recent ones)."""

_opening: weakref.WeakValueDictionary[tuple[str, str, str], asyncio.Lock] = (
    weakref.WeakValueDictionary()
)
"""One lock per ``(package, agent, threadId)`` being opened in this process."""


async def open_thread(
    runtime: Runtime, package: str, agent: str, client_id: str
) -> tuple[ThreadState, bool]:
    """The thread ``client_id`` names for ``package/agent``; created on its first run.

    Returns:
        The thread, and whether it was created now.

    Raises:
        MissingVariablesError: a new thread's agent needs variables that have no value.
    """
    key = (package, agent, client_id)
    lock = _opening.get(key)
    if lock is None:
        lock = _opening[key] = asyncio.Lock()
    async with lock:  # two first runs of one conversation on this worker make one thread
        thread = await _named(runtime, package, agent, client_id)
        if thread is None:
            thread = await _mapped(runtime, package, agent, client_id)
        if thread is not None:
            return thread, False
        thread = await runtime.create_thread(agent, package=package, tags=[TAG])
        await runtime.store.set_value(thread.thread_id, THREAD_KEY + client_id, True)
        return thread, True


def _ours(thread: ThreadState, package: str, agent: str) -> bool:
    return thread.package == package and thread.agent_id == agent and thread.parent_id is None


async def _named(runtime: Runtime, package: str, agent: str, thread_id: str) -> ThreadState | None:
    """The thread whose id ``thread_id`` is, when it is a top-level thread of the agent."""
    try:
        thread = await runtime.thread_for_message(thread_id)
    except ThreadNotFoundError:
        return None
    return thread if _ours(thread, package, agent) else None


async def _mapped(runtime: Runtime, package: str, agent: str, client_id: str) -> ThreadState | None:
    """The thread an earlier run created for the client's ``client_id``, if any."""
    for thread_id in await runtime.store.threads_with_value(THREAD_KEY + client_id):
        try:
            thread = await runtime.thread_for_message(thread_id)
        except ThreadNotFoundError:
            continue
        if _ours(thread, package, agent):
            return thread
    return None


async def new_messages(
    runtime: Runtime, thread: ThreadState, messages: Sequence[Said], fresh: bool
) -> list[Said]:
    """The messages after the last one the thread holds (all of them on a ``fresh`` thread)."""
    if fresh:
        return list(messages)
    taken = set(await runtime.store.get_value(thread.thread_id, IDS_KEY) or ())
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        said = messages[index]
        if said.id in taken or await thread.get_message(said.id) is not None:
            start = index + 1
            break
    return list(messages[start:])


async def remember(runtime: Runtime, thread: ThreadState, taken: Sequence[Said]) -> None:
    """Add the ids of client messages the thread took in to those it remembers."""
    if not taken:
        return
    store = runtime.store
    ids = list(await store.get_value(thread.thread_id, IDS_KEY) or ())
    ids += [said.id for said in taken if said.id not in ids]
    await store.set_value(thread.thread_id, IDS_KEY, ids[-KEEP_IDS:])
