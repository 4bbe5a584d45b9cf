"""A remote exchange's end: the child's answer, its session outcome, and the settlement.

:func:`commit` stores what the remote said as the child's ``assistant`` answer and ends the
child's session with the outcome its parent receives:

* ``completed``: the artifacts' text (data parts as JSON when there is no text) and files;
  the flow stops with ``session_stop``;
* ``input-required``, ``auth-required``: the remote's question and how to answer it; the flow
  stops with ``awaiting_human`` and the child waits (even a non-resumable one), its registry
  status the waiting state;
* ``failed``, ``rejected``, ``canceled``, or no answer at all (unreachable, refused, timed
  out): a failure naming the agent and its URL; the flow stops with ``session_fail``.

:func:`replay` ends the session from an answer stored before a restart.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sa_core.engine.files import store_attachment
from sa_core.engine.flowtypes import SessionOutcome, StepResult, StopReason
from sa_core.engine.messages import create_message, new_id, new_message
from sa_core.engine.model.modelcall import new_log
from sa_core.engine.model.structured import OUTPUT
from sa_core.engine.remote.remote_client import where
from sa_core.engine.remote.remote_record import save
from sa_core.engine.remote.remote_task import FAILED, WAITING, Answer
from sa_core.engine.secrets import redact
from sa_core.spec import AttachmentRef

if TYPE_CHECKING:
    from sa_core.engine.flowview import RemoteFlow
    from sa_core.engine.remote.remote_client import RemoteError
    from sa_core.engine.remote.remote_record import Record
    from sa_core.engine.remote.remote_task import TaskView
    from sa_core.spec import RemoteAgentDefinition

A2A = "a2a"
"""The metadata key of the messages an exchange stores (``kind``: ``status`` or ``answer``)."""
NEEDS = {"input-required": "more input", "auth-required": "authorization"}
ANSWER_HINT = (
    "\n\nAnswer it with subagent_message (referenceId: {ref}); the same remote task continues."
)


def _outcome(
    remote: RemoteAgentDefinition,
    view: TaskView,
    answer: Answer,
    error: RemoteError | None,
    child_id: str,
) -> tuple[str, str, bool]:
    """``(state, outcome text, failed)`` of an ended exchange."""
    if error is not None:
        return "error", str(error), True
    state = view.state
    said = answer.text or view.status_text or "no details given"
    if state in WAITING:
        text = f"{where(remote)} needs {NEEDS[state]} to continue ({state}): {said}"
        return state, text + ANSWER_HINT.format(ref=child_id), False
    if state in FAILED:
        return state, f"{where(remote)} reported the task {state}: {said}", True
    if state != "completed":
        return state, f"{where(remote)} stopped in state '{state}' without an answer.", True
    text = answer.text
    if answer.data:
        shown = answer.data[0] if len(answer.data) == 1 else answer.data
        dumped = json.dumps(shown, ensure_ascii=False, indent=2)
        text = f"{text}\n\n{dumped}" if text else dumped
    return state, text or "(The remote agent answered with no content.)", False


def _scrubbed(data: Any, secrets: list[str]) -> Any:
    """Structured output with the secret values redacted (kept as it is when none occurs)."""
    dumped = json.dumps(data, ensure_ascii=False)
    cleaned = redact(dumped, secrets)
    if cleaned == dumped:
        return data
    try:
        return json.loads(cleaned)
    except ValueError:
        return cleaned


def _stop_reason(state: str, failed: bool) -> StopReason:
    if state in WAITING:
        return "awaiting_human"
    return "session_fail" if failed else "session_stop"


async def commit(
    flow: RemoteFlow,
    remote: RemoteAgentDefinition,
    record: Record,
    view: TaskView,
    error: RemoteError | None,
    header_values: list[str],
    answer: Answer | None = None,
) -> StepResult:
    """Store the answer and end the session, settling the flow in the same commit if it can.

    ``header_values``: the resolved header values, scrubbed (with the thread's secrets) from
    everything stored. ``answer``: the completed answer with its linked files downloaded
    (else it is read from ``view``; a file still only linked is not stored).
    """
    kernel, thread = flow.kernel, flow.thread
    if error is not None:
        answer = Answer("", [], [])
    elif answer is None:
        answer = view.answer()
    state, text, failed = _outcome(remote, view, answer, error, thread.thread_id)
    secrets = [*header_values, *kernel.secret_values(thread)]
    text = redact(text, secrets)
    shown = redact(answer.text, secrets) if state == "completed" else text
    meta: dict[str, Any] = {
        A2A: {"kind": "answer", "state": state, "task_id": view.task_id or None,
              "context_id": view.context_id or record.context_id, "outcome": text,
              "failed": failed, **({"error_code": error.code} if error is not None else {})},
    }  # fmt: skip
    if answer.data:
        meta[OUTPUT] = _scrubbed(answer.data[0] if len(answer.data) == 1 else answer.data, secrets)
    ended = record.replace(
        context_id=view.context_id or record.context_id,
        task_id=view.task_id if state in WAITING else None,
        state=state,
    )
    reason = _stop_reason(state, failed)
    async with kernel.store.transaction() as tx:
        refs = [
            await store_attachment(kernel.store, thread.thread_id, f.name, f.data, f.mime_type)
            for f in answer.files
            if not f.url
        ]
        message = new_message(
            thread.thread_id, "assistant", shown or text, metadata=meta, attachments=refs or None
        )
        stored = await create_message(kernel, thread, message, tx=tx)
        flow.remember(stored)
        await save(kernel, thread.thread_id, ended)
        if view.usage:
            await kernel.store.insert_log(thread.thread_id, _usage_log(remote, view.usage), tx=tx)
        await flow.end_session(SessionOutcome(_session(state, failed), failed, text, refs))
        if flow.settles_in_step():
            flow.settled_in_commit(await kernel.scheduler.settle_and_read_queue(flow, tx, reason))
    return StepResult(stored, [], [], stored.content or "", reason)


def _session(state: str, failed: bool) -> str:
    """The session outcome's reason: the waiting state, or the terminal tool it stands for."""
    if state in WAITING:
        return state
    return "session_fail" if failed else "session_stop"


def _usage_log(remote: RemoteAgentDefinition, usage: dict[str, Any]) -> Any:
    """An ``llm_call`` log of the usage the remote reported (so it rolls up the tree)."""

    def count(*keys: str) -> int:
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int | float):
                return int(value)
        return 0

    data: dict[str, Any] = {
        "provider": "a2a",
        "model": f"a2a:{remote.name}",
        "model_name": f"a2a:{remote.name}",
        "input_tokens": count("input_tokens", "prompt_tokens", "inputTokens"),
        "output_tokens": count("output_tokens", "completion_tokens", "outputTokens"),
    }
    cost = usage.get("cost_usd", usage.get("cost_total", usage.get("costUsd")))
    if isinstance(cost, int | float):
        data["cost_total"] = float(cost)
    return new_log("llm_call", data)


async def replay(flow: RemoteFlow, remote: RemoteAgentDefinition) -> StepResult:
    """End the session from the answer stored before a restart (or stop: nothing to send)."""
    last = next(
        (m for m in reversed(flow.messages) if (m.metadata or {}).get(A2A, {}).get("kind")),
        None,
    )
    meta = (last.metadata or {}).get(A2A, {}) if last is not None else {}
    if last is None or meta.get("kind") != "answer":
        placeholder = new_message(flow.thread.thread_id, "assistant", None, id=new_id())
        return StepResult(placeholder, [], [], "", "awaiting_human")
    state, failed = str(meta.get("state")), bool(meta.get("failed"))
    refs = [AttachmentRef.model_validate(a) for a in last.attachments or []]
    text = str(meta.get("outcome") or last.content or "")
    await flow.end_session(SessionOutcome(_session(state, failed), failed, text, refs))
    return StepResult(last, [], [], last.content or "", _stop_reason(state, failed))


__all__ = ["A2A", "commit", "replay"]
