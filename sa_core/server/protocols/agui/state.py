"""AG-UI state: a thread's values, as one JSON object, and its changes as JSON Patch.

The state of a thread is the object of its values by key, without the runtime's own (keys
starting with ``sa:``, ``a2a:``: approvals, conversation indexes, A2A tasks), with the values of
the thread's secret variables replaced by ``[redacted]``. A run's ``state`` sets values
(:func:`apply_state`); a value the agent sets during the run reaches the client as a patch of
the key (:func:`patch`), and the run ends with the patch of whatever the live frames did not
tell (:func:`changes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sa_core.runtime import Runtime
from sa_core.state import ThreadState

RESERVED = ("sa:", "a2a:")
"""Prefixes of the value keys the runtime keeps for itself: never in the state, never set by it."""


def reserved(key: str) -> bool:
    """Whether ``key`` is a value key of the runtime's own."""
    return key.startswith(RESERVED)


def pointer(key: str) -> str:
    """The JSON Pointer (RFC 6901) of a top-level key."""
    return "/" + key.replace("~", "~0").replace("/", "~1")


def scrubbed(runtime: Runtime, thread: ThreadState, value: Any) -> Any:
    """``value`` with every secret value of the thread in its strings replaced."""
    if isinstance(value, str):
        return runtime.redact_secrets(thread, value)
    if isinstance(value, dict):
        return {
            scrubbed(runtime, thread, k): scrubbed(runtime, thread, v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [scrubbed(runtime, thread, item) for item in value]
    return value


async def read_state(runtime: Runtime, thread: ThreadState) -> dict[str, Any]:
    """The thread's state now (see the module docstring)."""
    values = await runtime.store.list_values(thread.thread_id)
    return {
        key: scrubbed(runtime, thread, value) for key, value in values.items() if not reserved(key)
    }


async def apply_state(
    runtime: Runtime, thread: ThreadState, current: Mapping[str, Any], given: Mapping[str, Any]
) -> dict[str, Any]:
    """Set each key of ``given`` that differs from ``current`` as a thread value.

    Keys ``given`` leaves out are kept. Returns the state after it.
    """
    state = dict(current)
    for key, value in given.items():
        shown = scrubbed(runtime, thread, value)
        if key in state and state[key] == shown:
            continue
        await thread.set_value(key, value)
        state[key] = shown
    return state


def patch(state: dict[str, Any], key: str, value: Any) -> list[dict[str, Any]]:
    """The JSON Patch that sets ``key`` to ``value`` in ``state`` (empty when it is so)."""
    if reserved(key) or (key in state and state[key] == value):
        return []
    op = "replace" if key in state else "add"
    state[key] = value
    return [{"op": op, "path": pointer(key), "value": value}]


def changes(state: dict[str, Any], now: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch from ``state`` to ``now`` (``state`` becomes ``now``)."""
    ops: list[dict[str, Any]] = []
    for key, value in now.items():
        ops += patch(state, key, value)
    for key in [k for k in state if k not in now]:
        del state[key]
        ops.append({"op": "remove", "path": pointer(key)})
    return ops
