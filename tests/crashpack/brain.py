"""The crash pack's model: a deterministic provider plugin named ``crashbrain``.

It answers from the conversation alone (no state in the process), so a restarted server asks
it the same question and gets the same answer. Registered through the ``sa`` entry-point group
by the ``crashpack_brain`` distribution metadata under ``site/`` (put that directory and
``tests/`` on ``PYTHONPATH``).
"""

from __future__ import annotations

import re
from typing import Any

from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider
from sa_hooks import hookimpl

_JOB = re.compile(r"^job (\S+) (tool|block|bg|note|effect)$")
_FIRST = {
    "tool": ("record", "op"),
    "block": ("worker", "task"),
    "bg": ("scout", "task"),
    "note": ("note", "op"),
    "effect": ("remind", "op"),
}


def _call(name: str, key: str, job: str, step: str, value: str | None = None) -> dict[str, Any]:
    op = f"{job}-{step}"
    return {"tool_calls": [{"id": f"c-{op}", "name": name, "arguments": {key: value or op}}]}


def _conversation(request: ProviderRequest) -> list[Any]:
    return [m for m in request.messages if m.role != "system"]


def _parent(request: ProviderRequest) -> Any:
    messages = _conversation(request)
    if not messages:
        return "idle"
    last = messages[-1]
    text = (last.content or "").strip() if last.role == "user" else ""
    matched = _JOB.match(text)
    if matched is not None:
        job = f"{matched.group(1)}~{matched.group(2)}"
        name, key = _FIRST[matched.group(2)]
        value = f"{'blk' if name == 'worker' else 'bg'} {job}" if key == "task" else None
        return _call(name, key, job, "1", value)
    return _continue(messages)


def _continue(messages: list[Any]) -> Any:
    """Take the next step of the latest job (a notification may have arrived in between)."""
    job = None
    for message in reversed(messages):
        matched = _JOB.match((message.content or "").strip()) if message.role == "user" else None
        if matched is not None:
            job = f"{matched.group(1)}~{matched.group(2)}"
            break
    if job is None:
        return "noted"
    answered = any(m.role == "assistant" and m.content == f"done {job}" for m in messages)
    results = {m.tool_call_id for m in messages if m.role == "tool"}
    if answered:
        return "noted"
    if f"c-{job}-1" not in results:
        # the job's message and a notification reached the same turn (a notification queued
        # by one worker while another took the user's message): start the job now
        called = {call.id for m in messages if m.role == "assistant" for call in m.tool_calls}
        if f"c-{job}-1" in called:
            return "noted"  # started, its result is on the way
        name, key = _FIRST[job.split("~", 1)[1]]
        value = f"{'blk' if name == 'worker' else 'bg'} {job}" if key == "task" else None
        return _call(name, key, job, "1", value)
    if job.endswith("~tool") and f"c-{job}-2" not in results:
        return _call("record", "op", job, "2")
    return f"done {job}"


def _child(request: ProviderRequest) -> Any:
    if not request.tools:  # side B never acts in practice; answer plainly
        return "ok"
    messages = _conversation(request)
    first = next((m for m in messages if m.role == "user"), None)
    task = (first.content or "").strip() if first is not None else ""
    job = task.split(" ", 1)[-1]
    last = messages[-1] if messages else None
    if last is not None and last.role == "tool":
        return {
            "tool_calls": [
                {
                    "id": f"c-{job}-fin",
                    "name": "finish",
                    "arguments": {"summary": f"child {job} done"},
                }
            ]
        }
    return _call("record", "op", job, "child")


def think(request: ProviderRequest) -> Any:
    """Answer one request (see the module docstring of :mod:`crashpack`)."""
    if request.model == "child-model":
        return _child(request)
    return _parent(request)


@hookimpl
def sa_register_providers(register: Any) -> None:
    """Register the ``crashbrain`` provider."""
    register(FunctionProvider(think, name="crashbrain"))
