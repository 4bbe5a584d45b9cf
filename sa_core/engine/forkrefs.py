"""A forked child answers to its source's reference too.

A fork's children are new threads with new ids, but the history the fork shares names the
source's children (``Reference: ...`` in the subagent tools' results). When the fork's model
addresses a child by such a reference, :func:`current_reference` finds the fork's child made
from it (its thread's ``properties["forked_from"]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef

FORKED_FROM = "forked_from"
"""The property of a forked thread naming the thread it was forked from."""


async def current_reference(kernel: Kernel, thread: ThreadRef, reference: Any) -> Any:
    """The thread's child a reference names, for a fork also by its source's reference.

    ``reference`` itself when it names one of the thread's children, else the reference of the
    child forked from the thread it names (``reference`` as given when there is none).
    """
    if not isinstance(reference, str) or any(e.reference == reference for e in thread.children):
        return reference
    for entry in thread.children:
        row = kernel.threads.live_row(entry.reference) or await kernel.store.get_thread(
            entry.reference
        )
        if row is not None and row.properties.get(FORKED_FROM) == reference:
            return entry.reference
    return reference
