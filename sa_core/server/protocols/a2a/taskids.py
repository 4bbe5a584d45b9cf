"""Ids of our A2A tasks, and where tasks are stored.

A task id is ``<thread id>.<turn key>``; the task is the thread value ``a2a:task:<turn key>``.
Imports no A2A code (the push sender reads stored tasks without it).
"""

from __future__ import annotations

import uuid

KEY_PREFIX = "a2a:task:"
"""Thread values holding tasks: this prefix and the turn key."""


def new_task_id(thread_id: str) -> str:
    """A task id: the thread id, a dot, and a random turn key."""
    return f"{thread_id}.{uuid.uuid4().hex[:16]}"


def split_task_id(task_id: str) -> tuple[str, str] | None:
    """``(thread_id, turn_key)`` of a task id, or None when it is not one of ours."""
    thread_id, dot, turn = task_id.rpartition(".")
    if not dot or not thread_id or not turn or len(task_id) > 300:
        return None
    return thread_id, turn


def task_key(task_id: str) -> tuple[str, str] | None:
    """``(thread_id, value key)`` where a task is stored, or None when it is not one of ours."""
    split = split_task_id(task_id)
    return None if split is None else (split[0], KEY_PREFIX + split[1])


__all__ = ["KEY_PREFIX", "new_task_id", "split_task_id", "task_key"]
