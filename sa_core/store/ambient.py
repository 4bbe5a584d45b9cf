"""The store transaction open in the current task, and contexts without one.

``store.transaction()`` sets :data:`current_tx` for its block; a store call in that task (or in
a task started from it) joins that transaction. No database code here: the engine imports
:func:`detached_context` without loading SQLAlchemy.
"""

from __future__ import annotations

from contextvars import Context, ContextVar, copy_context
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sa_core.store.interface import Transaction

current_tx: ContextVar[Transaction | None] = ContextVar("sa_store_tx", default=None)
"""The transaction the current task's ``store.transaction()`` block opened, if any."""


def detached_context() -> Context:
    """A copy of the current context without an open store transaction.

    Start tasks in it (``asyncio.create_task(coro, context=detached_context())``) when the
    caller may be inside a transaction block: a task started there would otherwise join the
    caller's transaction.
    """
    context = copy_context()
    context.run(current_tx.set, None)
    return context
