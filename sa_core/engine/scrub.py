"""Secret scrubbing of what leaves for live subscribers: custom event payloads, thread values.

``state.emit(event, data)`` publishes whatever a tool or hook hands it, and
``state.set_value(key, value)`` publishes the value it stores (:mod:`sa_core.engine.frames`).
A tool that reads a secret variable could put its value in either; :func:`scrub_payload`
replaces the values of the thread's secret variables with ``[redacted]``, the same
rule :func:`~sa_core.engine.secrets.redact` applies to tool results, so a secret never reaches
an SSE or WebSocket client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from sa_core.engine.secrets import redact

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef


def scrub_payload(kernel: Kernel, thread: ThreadRef, data: Any) -> Any:
    """Return ``data`` with every secret value of the thread replaced by ``[redacted]``.

    Strings are scrubbed wherever they appear (dict keys and values, list items, nested
    models). The payload is returned unchanged, as the same object, when the thread has no
    secret values or none of them occurs in it.

    Args:
        kernel: the kernel.
        thread: the emitting thread.
        data: the event payload.

    Returns:
        The payload to publish.
    """
    if data is None or isinstance(data, bool | int | float):
        return data
    values = kernel.secret_values(thread)
    if not values:
        return data
    if isinstance(data, str):
        return redact(data, values)
    plain = to_jsonable_python(data, fallback=str)
    if not any(_contains(plain, value) for value in values):
        return data
    return _walk(plain, values)


def _contains(value: Any, secret: str) -> bool:
    if isinstance(value, str):
        return secret in value
    if isinstance(value, dict):
        return any(_contains(k, secret) or _contains(v, secret) for k, v in value.items())
    if isinstance(value, list):
        return any(_contains(item, secret) for item in value)
    return False


def _walk(value: Any, values: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, values)
    if isinstance(value, dict):
        return {_walk(k, values): _walk(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(item, values) for item in value]
    return value
