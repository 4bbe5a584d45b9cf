"""Plain row types returned by the store where no spec record model fits."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Final


class Unset(enum.Enum):
    """Type of the :data:`UNSET` sentinel ("no filter", as opposed to ``None``)."""

    UNSET = "UNSET"


UNSET: Final = Unset.UNSET
"""Default of filters where ``None`` is a meaningful value (``parent_id=None``: top level)."""


@dataclass(slots=True)
class ThreadRow:
    """A thread as stored.

    Attributes:
        id: The thread id.
        package: The package the agent belongs to.
        agent_id: The agent definition name.
        created_at: Creation time (µs).
        user_id: The owning user, if any.
        parent_id: The parent thread of a subagent thread.
        terminated: When the thread was terminated (µs), or ``None``.
        stopped: Whether execution was stopped.
        env: Thread variables, secrets included (never return them from APIs).
        env_types: Variable name to ``"text"`` or ``"secret"``.
        tags: Free-form tags (filterable with ``list_threads(tag=...)``).
        properties: Free-form thread properties.
        execution: Engine state (turn counters, acting side, parked flag...).
        updated_at: Last update (µs).
        timeline: Where the history of a fork or a rewound thread comes from (see
            :mod:`sa_core.store.timeline`); ``None`` for a thread whose history is its own.

    """

    id: str
    package: str
    agent_id: str
    created_at: int = 0
    user_id: str | None = None
    parent_id: str | None = None
    terminated: int | None = None
    stopped: bool = False
    env: dict[str, str] = field(default_factory=dict)
    env_types: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict)
    updated_at: int = 0
    timeline: dict[str, Any] | None = None


THREAD_FIELDS: Final = frozenset(ThreadRow.__dataclass_fields__)


@dataclass(slots=True)
class QueueEntry:
    """A message waiting in a thread's queue."""

    id: str
    thread_id: str
    role: str
    content: str
    attachments: list[dict[str, Any]] = field(default_factory=list)
    silent: bool = False
    metadata: dict[str, Any] | None = None
    created_at: int = 0


@dataclass(slots=True)
class EffectRun:
    """A scheduled effect claimed for running (status ``processing``)."""

    id: str
    thread_id: str
    name: str
    args: dict[str, Any]
    scheduled_at: int
    created_at: int
    attempt: int = 1
    """Which run this is: 2 when a restart interrupted the first one."""


@dataclass(slots=True)
class ApiKeyRow:
    """An API key without its secret: only a display prefix is kept besides the hash."""

    id: str
    name: str
    prefix: str
    created_at: int
    revoked_at: int | None = None
    packages: tuple[str, ...] | None = None
    """The packages the key opens (others answer as if they did not exist); ``None``: all."""
    read_only: bool = False
    """The key may list and read, but not create threads, send messages or change anything."""

    @property
    def revoked(self) -> bool:
        """Whether the key was revoked."""
        return self.revoked_at is not None

    @property
    def full_access(self) -> bool:
        """Whether the key opens every package, read-write (only such keys manage keys)."""
        return self.packages is None and not self.read_only

    def allows(self, package: str) -> bool:
        """Whether the key opens ``package``."""
        return self.packages is None or package in self.packages

    def describe_access(self) -> str:
        """What the key opens, in words: ``read-only, packages alpha and beta``."""
        if self.packages is None:
            where = "every package"
        elif len(self.packages) == 1:
            where = f"package {self.packages[0]}"
        else:
            where = f"packages {', '.join(self.packages[:-1])} and {self.packages[-1]}"
        return f"{'read-only' if self.read_only else 'read-write'}, {where}"


@dataclass(slots=True)
class RecordedCall:
    """One recorded model call.

    Attributes:
        thread_id: The thread the call was made for.
        log_id: Its ``llm_call`` log row.
        message_id: The message the answer became (a compaction's marker for a summary).
        request_hash: The canonical request's hash (see :mod:`sa_core.engine.model.recording`).
        request: The hashes of the request's parts, and their text where it changed.
        response: The provider's answer (content, tool calls, reasoning, usage, finish).
        created_at: When the answer arrived (the log's time), microseconds since the epoch.
    """

    thread_id: str
    log_id: str
    message_id: str | None
    request_hash: str
    request: dict[str, Any]
    response: dict[str, Any]
    created_at: int

    def to_json(self) -> dict[str, Any]:
        """The call as a JSON object (the export format's ``model_calls`` items)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], thread_id: str | None = None) -> RecordedCall:
        """A call from :meth:`to_json`'s object (``thread_id`` replaces the recorded one)."""
        return cls(
            thread_id=thread_id or data["thread_id"],
            log_id=data["log_id"],
            message_id=data.get("message_id"),
            request_hash=data["request_hash"],
            request=dict(data.get("request") or {}),
            response=dict(data.get("response") or {}),
            created_at=int(data.get("created_at") or 0),
        )


@dataclass(slots=True, eq=False)
class RequestParts:
    """The unchanging parts of recorded requests, stored once per distinct content.

    Attributes:
        key: Its digest (16 hex digits of SHA-256 over the part digests, :func:`parts_key`).
        parts: ``system`` (digest), ``tools`` (digest by name), ``settings`` (digest) and, when
            known, ``texts`` (their words: ``system``, ``tools``, ``settings``).
        stored: Whether a committed transaction of this process wrote its row (then no call
            writes it again).
    """

    key: str
    parts: dict[str, Any]
    stored: bool = False

    def mark_stored(self) -> None:
        """Note that its row is committed (called after the commit that wrote it)."""
        self.stored = True
