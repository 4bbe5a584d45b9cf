"""Conversions between our threads and A2A objects: parts, statuses, artifacts, task ids."""

from __future__ import annotations

import base64
import os
import uuid
from typing import Any

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict

from sa_core.server.protocols.a2a.outcome import TurnOutcome
from sa_core.server.protocols.a2a.taskids import new_task_id, split_task_id
from sa_core.state import ThreadState

STATES: dict[str, int] = {
    "working": TaskState.TASK_STATE_WORKING,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "canceled": TaskState.TASK_STATE_CANCELED,
    "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
}
TERMINAL: frozenset[int] = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
ANSWER_ARTIFACT = "answer"
INLINE_FILE_BYTES = 256 * 1024
"""Files up to this size travel inline (``raw``); larger ones as a URL of our HTTP API."""


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` (by its value) -> ``input-required``."""
    try:
        name = str(TaskState.Name(state))
    except ValueError:
        return "unspecified"
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def sa_meta(task: Task) -> dict[str, Any]:
    """What we keep in ``task.metadata['sa']``: the thread id and the task's message ids."""
    meta = MessageToDict(task.metadata).get("sa") if task.HasField("metadata") else None
    return meta if isinstance(meta, dict) else {}


def agent_text(text: str, context_id: str, task_id: str) -> Message:
    """An agent message with one text part."""
    return Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )


def outcome_status(outcome: TurnOutcome, context_id: str, task_id: str) -> TaskStatus:
    """The A2A status of a turn outcome (with its note as the status message)."""
    status = TaskStatus(state=STATES[outcome.state])  # type: ignore[arg-type]
    status.timestamp.GetCurrentTime()
    if outcome.note:
        status.message.CopyFrom(agent_text(outcome.note, context_id, task_id))
    return status


def message_parts(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """The text and the attachments (``{name, mime_type, data}``) of a client message.

    Text parts are joined with blank lines; data parts are sent as JSON text; file parts with
    bytes become attachments. URL parts are refused: the server does not fetch URLs.

    Raises:
        ValueError: a part the server cannot take (says which and why).
    """
    from google.protobuf.json_format import MessageToJson

    texts: list[str] = []
    files: list[dict[str, Any]] = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(MessageToJson(part.data, indent=None))
        elif kind == "raw":
            files.append(
                {
                    "name": part.filename or f"part-{index}",
                    "mime_type": part.media_type or "application/octet-stream",
                    "data": base64.b64encode(part.raw).decode(),
                }
            )
        else:
            raise ValueError(
                f"Part {index} is a URL ({part.url!r}); this server does not fetch URLs. Send "
                "the file's bytes in a 'raw' part instead."
            )
    return "\n\n".join(texts), files


async def answer_artifacts(
    thread: ThreadState, outcome: TurnOutcome, base_url: str = ""
) -> list[Artifact]:
    """The artifacts of a finished turn: the answer text, then each file it produced.

    A file over :data:`INLINE_FILE_BYTES` is a ``url`` part on the thread's files API: under
    ``base_url``, else the server's public URL (``sa serve --public-url``), else relative to
    the A2A endpoint's origin (our client reads it against the agent's endpoint).
    """
    base_url = base_url or os.environ.get("SA_PUBLIC_URL", "").rstrip("/")
    parts: list[Part] = []
    if outcome.answer is not None and outcome.answer.content:
        parts.append(Part(text=outcome.answer.content))
    for record in outcome.files:
        part = Part(filename=record.name, media_type=record.mime_type)
        if record.size <= INLINE_FILE_BYTES:
            data = await thread.read_file(record.path)
            if data is None:
                continue
            part.raw = data
        else:
            part.url = (
                f"{base_url}/api/packages/{thread.package}/threads/{thread.thread_id}/files"
                f"{record.path}"
            )
        part.metadata.update({"path": record.path})
        parts.append(part)
    if not parts:
        return []
    artifact_id = outcome.answer.id if outcome.answer is not None else ANSWER_ARTIFACT
    return [Artifact(artifact_id=artifact_id, name=ANSWER_ARTIFACT, parts=parts)]


__all__ = [
    "ANSWER_ARTIFACT",
    "STATES",
    "TERMINAL",
    "agent_text",
    "answer_artifacts",
    "message_parts",
    "new_task_id",
    "outcome_status",
    "sa_meta",
    "split_task_id",
    "state_name",
]
