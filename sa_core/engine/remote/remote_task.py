"""What a remote A2A task has said so far: its state, status notes, artifacts and usage.

A :class:`TaskView` takes the SDK's stream items (``task``, ``message``, ``status_update``,
``artifact_update``) and task snapshots (``tasks/get``) one by one and keeps the task's latest
state, its artifacts (``append`` chunks joined, a non-``append`` update replacing the artifact)
and the usage the remote reported in its metadata. :meth:`TaskView.answer` turns the artifacts
into what the child's answer is made of: text, structured data and files.

Only protobuf methods of the objects given are used; nothing here imports the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
"""States after which the task never changes."""
WAITING = frozenset({"input-required", "auth-required"})
"""States in which the task waits for the client's next message."""
FAILED = frozenset({"failed", "canceled", "rejected"})
"""Terminal states that are failures for the parent."""


def state_name(value: int, names: Any) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` (by its enum value) -> ``input-required``.

    Args:
        value: The ``TaskState`` enum value.
        names: The ``TaskState`` enum wrapper (its ``Name`` gives the constant's name).
    """
    try:
        name = str(names.Name(value))
    except ValueError:
        return "unknown"
    state = name.removeprefix("TASK_STATE_").lower().replace("_", "-")
    return "unknown" if state == "unspecified" else state


def plain(value: Any) -> Any:
    """A protobuf ``Value``, ``Struct`` or ``ListValue`` as plain JSON-able Python."""
    kind_name = getattr(getattr(value, "DESCRIPTOR", None), "full_name", "")
    if kind_name == "google.protobuf.Struct":
        return {key: plain(item) for key, item in value.fields.items()}
    if kind_name == "google.protobuf.ListValue":
        return [plain(item) for item in value.values]
    if kind_name != "google.protobuf.Value":
        return value
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "number_value":
        number = value.number_value
        return int(number) if float(number).is_integer() else number
    if kind in ("struct_value", "list_value"):
        return plain(getattr(value, kind))
    return getattr(value, kind)


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A file part the remote returned: its bytes, or (before it is fetched) its URL."""

    name: str
    mime_type: str
    data: bytes
    url: str = ""


@dataclass(slots=True)
class Answer:
    """What the remote's artifacts (or direct message) come to."""

    text: str
    data: list[Any]
    files: list[RemoteFile]


@dataclass(slots=True)
class TaskView:
    """The task as the stream and snapshots have shown it (see the module docstring)."""

    states: Any
    """The SDK's ``TaskState`` enum (to name states)."""
    task_id: str = ""
    context_id: str = ""
    state: str = "submitted"
    status_text: str = ""
    artifacts: dict[str, list[Any]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    """Status texts seen since :meth:`take_notes` last emptied them."""

    @property
    def settled(self) -> bool:
        """Whether the task ended, or waits for the client's next message."""
        return self.state in TERMINAL or self.state in WAITING

    def take(self, item: Any) -> None:
        """Take one stream item (a ``StreamResponse``)."""
        kind = item.WhichOneof("payload")
        if kind == "task":
            self.snapshot(item.task)
        elif kind == "message":  # answered directly, without a task
            self._ids(item.message.task_id, item.message.context_id)
            self.artifacts = {"message": list(item.message.parts)}
            self.state = "completed"
        elif kind == "status_update":
            update = item.status_update
            self._ids(update.task_id, update.context_id)
            self._status(update.status)
            self._metadata(update)
        elif kind == "artifact_update":
            update = item.artifact_update
            self._ids(update.task_id, update.context_id)
            self._artifact(update.artifact, update.append)

    def snapshot(self, task: Any) -> None:
        """Take a whole task (from ``tasks/get``, or the first item of a stream)."""
        self._ids(task.id, task.context_id)
        self._status(task.status)
        if len(task.artifacts):
            self.artifacts = {}
            for artifact in task.artifacts:
                self._artifact(artifact, False)
        self._metadata(task)

    def take_notes(self) -> list[str]:
        """The status texts seen since the last call."""
        notes, self.notes = self.notes, []
        return notes

    def _ids(self, task_id: str, context_id: str) -> None:
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id

    def _status(self, status: Any) -> None:
        state = state_name(status.state, self.states)
        if state != "unknown":
            self.state = state
        if status.HasField("message"):
            text = "\n".join(
                p.text for p in status.message.parts if p.WhichOneof("content") == "text"
            )
            if text.strip() and text != self.status_text:
                self.notes.append(text.strip())
            self.status_text = text.strip() or self.status_text

    def _artifact(self, artifact: Any, append: bool) -> None:
        key = artifact.artifact_id or artifact.name or f"artifact-{len(self.artifacts)}"
        parts = list(artifact.parts)
        if not append or key not in self.artifacts:
            self.artifacts[key] = parts
            return
        kept = self.artifacts[key]
        for part in parts:
            last = kept[-1] if kept else None
            if _is_text(part) and last is not None and _is_text(last):
                kept[-1] = _TextPart(last.text + part.text)
            else:
                kept.append(part)

    def _metadata(self, holder: Any) -> None:
        if not holder.HasField("metadata"):
            return
        meta = plain(holder.metadata)
        usage = meta.get("usage") if isinstance(meta, dict) else None
        if isinstance(usage, dict):
            self.usage = usage

    def answer(self) -> Answer:
        """The text, data and files of the artifacts (the status text when there are none)."""
        texts: list[str] = []
        data: list[Any] = []
        files: list[RemoteFile] = []
        for key, parts in self.artifacts.items():
            for part in parts:
                kind = part.WhichOneof("content")
                if kind == "text":
                    texts.append(part.text)
                elif kind == "data":
                    data.append(plain(part.data))
                elif kind == "raw":
                    name = part.filename or f"{key}-{len(files) + 1}"
                    mime = part.media_type or "application/octet-stream"
                    files.append(RemoteFile(name, mime, bytes(part.raw)))
                elif kind == "url":
                    name = part.filename or part.url.rsplit("/", 1)[-1] or f"{key}-{len(files) + 1}"
                    mime = part.media_type or "application/octet-stream"
                    files.append(RemoteFile(name, mime, b"", part.url))
        text = "\n\n".join(t for t in texts if t.strip())
        if not text and not data and not files:
            text = self.status_text
        return Answer(text, data, files)


@dataclass(frozen=True, slots=True)
class _TextPart:
    """Text parts of one artifact joined by ``append`` updates (stands in for an SDK ``Part``)."""

    text: str

    def WhichOneof(self, group: str) -> str:  # noqa: N802 - the protobuf method it stands in for
        """Always ``text``."""
        return "text"


def _is_text(part: Any) -> bool:
    return bool(part.WhichOneof("content") == "text")


__all__ = ["FAILED", "TERMINAL", "WAITING", "Answer", "RemoteFile", "TaskView", "plain"]
