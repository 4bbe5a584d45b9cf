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
    """Take the next step of every job in the conversation that is not answered yet.

    A job can arrive while an earlier one is still running (a client whose server restarted
    sends its next job; it is queued and reaches the conversation before the next step), so
    the answer covers all of them: one line ``done <job>`` per finished job and the next tool
    call of each unfinished one, in a single response.
    """
    messages = _conversation(request)
    if not messages:
        return "idle"
    jobs = []
    for message in messages:
        matched = _JOB.match((message.content or "").strip()) if message.role == "user" else None
        if matched is not None:
            jobs.append((f"{matched.group(1)}~{matched.group(2)}", matched.group(2)))
    answered = {
        line[len("done ") :]
        for m in messages
        if m.role == "assistant"
        for line in (m.content or "").splitlines()
        if line.startswith("done ")
    }
    called = {call.id for m in messages if m.role == "assistant" for call in m.tool_calls or []}
    results = {m.tool_call_id for m in messages if m.role == "tool"}
    finished: list[str] = []
    calls: list[dict[str, Any]] = []
    for job, kind in jobs:
        if job in answered:
            continue
        step = _next_step(job, kind, called, results)
        if step == "done":
            finished.append(job)
        elif step is not None:
            calls.extend(step["tool_calls"])
    text = "\n".join(f"done {job}" for job in finished)
    if calls:
        return {"content": text or None, "tool_calls": calls}
    return text or "noted"


def _next_step(job: str, kind: str, called: set[str], results: set[str]) -> Any:
    """A job's next call, ``"done"`` when its work is complete, or None while a call runs."""
    if f"c-{job}-1" not in called:
        name, key = _FIRST[kind]
        value = f"{'blk' if name == 'worker' else 'bg'} {job}" if key == "task" else None
        return _call(name, key, job, "1", value)
    if f"c-{job}-1" not in results:
        return None
    if kind == "tool":
        if f"c-{job}-2" not in called:
            return _call("record", "op", job, "2")
        if f"c-{job}-2" not in results:
            return None
    return "done"


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
