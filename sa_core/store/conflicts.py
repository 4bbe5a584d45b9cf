"""What a store write raises when a row it relied on changed since it was read.

The engine catches these (its transaction rolls back and it reads again); they live apart from
the SQL that raises them, so the engine imports them without loading SQLAlchemy.
"""

from __future__ import annotations


class ThreadChanged(Exception):
    """A thread's row changed (or went) since the caller read it: its transaction rolls back."""


class QueueChanged(Exception):
    """An entry a runner read was deleted (or taken) before the runner drained it."""
