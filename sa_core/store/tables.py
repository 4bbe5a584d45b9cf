"""SQLModel table classes of the store, and the Core ``Table`` objects the queries use.

Column types are portable (SQLite and PostgreSQL): integer microsecond timestamps in
``BigInteger``, JSON documents in ``JSON``, file bytes in ``LargeBinary``. Every table listed
per thread has an index on ``(thread_id, created_at)``. Child rows reference ``threads.id`` with
``ON DELETE CASCADE`` (the store also deletes them explicitly, so cascading never depends on
foreign keys being enforced).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    DDL,
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    event,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, REAL
from sqlmodel import Field, SQLModel

# An autoincrement key: INTEGER PRIMARY KEY (the rowid) on SQLite, BIGINT elsewhere.
_Seq = BigInteger().with_variant(Integer(), "sqlite")


def _json() -> JSON:
    return JSON(none_as_null=True)


def _thread_fk() -> ForeignKey:
    return ForeignKey("threads.id", ondelete="CASCADE")


def _c(*args: Any, **kwargs: Any) -> Any:
    """Build a ``Column`` typed as ``Any`` so SQLModel ``Field(sa_column=...)`` stays mypy clean."""
    return Column(*args, **kwargs)


class ThreadTable(SQLModel, table=True):
    """A thread (see :class:`sa_core.store.rows.ThreadRow`)."""

    __tablename__ = "threads"
    __table_args__ = (
        Index("ix_threads_created", "created_at"),
        Index("ix_threads_parent_created", "parent_id", "created_at"),
        Index("ix_threads_package_agent_created", "package", "agent_id", "created_at"),
    )

    id: str = Field(sa_column=_c(String, primary_key=True))
    package: str = Field(sa_column=_c(String, nullable=False))
    agent_id: str = Field(sa_column=_c(String, nullable=False))
    user_id: str | None = Field(default=None, sa_column=_c(String, nullable=True))
    parent_id: str | None = Field(default=None, sa_column=_c(String, _thread_fk(), nullable=True))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    updated_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    terminated: int | None = Field(default=None, sa_column=_c(BigInteger, nullable=True))
    stopped: bool = Field(default=False, sa_column=_c(Boolean, nullable=False, default=False))
    env: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    env_types: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    tags: list[str] | None = Field(default=None, sa_column=_c(_json()))
    properties: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    execution: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    timeline: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    """Where a fork's or a rewound thread's history comes from (:mod:`sa_core.store.timeline`);
    ``NULL`` for a thread whose history is all its own messages."""


class ThreadTagTable(SQLModel, table=True):
    """One tag of a thread (the filter index of ``ThreadTable.tags``)."""

    __tablename__ = "thread_tags"
    __table_args__ = (Index("ix_thread_tags_tag", "tag", "thread_id"),)

    thread_id: str = Field(sa_column=_c(String, _thread_fk(), primary_key=True))
    tag: str = Field(sa_column=_c(String, primary_key=True))


class MessageTable(SQLModel, table=True):
    """A message, with every field of the spec's Message (``meta`` holds ``metadata``)."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("ix_messages_thread_created", "thread_id", "created_at"),
        # only messages with a parent (a subprompt's): a top-level insert writes no page here
        Index(
            "ix_messages_thread_parent",
            "thread_id",
            "parent_id",
            sqlite_where=text("parent_id IS NOT NULL"),
            postgresql_where=text("parent_id IS NOT NULL"),
        ),
    )

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    id: str = Field(sa_column=_c(String, nullable=False, unique=True))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    role: str = Field(sa_column=_c(String, nullable=False))
    content: str | None = Field(default=None, sa_column=_c(String))
    name: str | None = Field(default=None, sa_column=_c(String))
    tool_calls: list[Any] | None = Field(default=None, sa_column=_c(_json()))
    tool_call_id: str | None = Field(default=None, sa_column=_c(String))
    log_id: str | None = Field(default=None, sa_column=_c(String))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    request_sent_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    response_completed_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    status: str | None = Field(default=None, sa_column=_c(String))
    silent: bool = Field(default=False, sa_column=_c(Boolean, nullable=False, default=False))
    tool_status: str | None = Field(default=None, sa_column=_c(String))
    reasoning_content: str | None = Field(default=None, sa_column=_c(String))
    reasoning_details: list[Any] | None = Field(default=None, sa_column=_c(_json()))
    parent_id: str | None = Field(default=None, sa_column=_c(String))
    depth: int = Field(default=0, sa_column=_c(Integer, nullable=False, default=0))
    prompt: str | None = Field(default=None, sa_column=_c(String))
    attachments: list[Any] | None = Field(default=None, sa_column=_c(_json()))
    meta: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    subagent_id: str | None = Field(default=None, sa_column=_c(String))
    subagent_name: str | None = Field(default=None, sa_column=_c(String))
    subagent_title: str | None = Field(default=None, sa_column=_c(String))
    subagent_description: str | None = Field(default=None, sa_column=_c(String))
    subagent_status: str | None = Field(default=None, sa_column=_c(String))
    subagent_resumable: bool | None = Field(default=None, sa_column=_c(Boolean))
    subagent_blocking: bool | None = Field(default=None, sa_column=_c(Boolean))
    subagent_thread_name: str | None = Field(default=None, sa_column=_c(String))
    subagent_spawn_group_id: str | None = Field(default=None, sa_column=_c(String))
    extra: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))


class LogTable(SQLModel, table=True):
    """A log row (model calls, tool calls, errors)."""

    __tablename__ = "logs"
    __table_args__ = (Index("ix_logs_thread_created", "thread_id", "created_at"),)

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    id: str = Field(sa_column=_c(String, nullable=False, unique=True))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    type: str = Field(sa_column=_c(String, nullable=False))
    data: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    parent_id: str | None = Field(default=None, sa_column=_c(String))
    extra: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))


class FileTable(SQLModel, table=True):
    """A file or directory (``is_directory``) of a thread's filesystem as it is now.

    A file's bytes are in ``file_blobs`` under ``blob`` (their SHA-256); every change is also
    kept in ``file_versions`` (:mod:`sa_core.store.filehistory`).
    """

    __tablename__ = "files"
    __table_args__ = (
        Index("ix_files_thread_parent", "thread_id", "parent"),
        Index("ix_files_thread_created", "thread_id", "created_at"),
    )

    thread_id: str = Field(sa_column=_c(String, _thread_fk(), primary_key=True))
    path: str = Field(sa_column=_c(String, primary_key=True))
    parent: str = Field(sa_column=_c(String, nullable=False))
    name: str = Field(sa_column=_c(String, nullable=False))
    is_directory: bool = Field(default=False, sa_column=_c(Boolean, nullable=False, default=False))
    mime_type: str = Field(sa_column=_c(String, nullable=False))
    storage: str = Field(default="local", sa_column=_c(String, nullable=False, default="local"))
    location: str | None = Field(default=None, sa_column=_c(String))
    size: int = Field(default=0, sa_column=_c(BigInteger, nullable=False, default=0))
    blob: str | None = Field(default=None, sa_column=_c(String))
    meta: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    width: int | None = Field(default=None, sa_column=_c(Integer))
    height: int | None = Field(default=None, sa_column=_c(Integer))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    updated_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class FileBlobTable(SQLModel, table=True):
    """File contents, stored once per distinct content (keyed by SHA-256, shared by threads)."""

    __tablename__ = "file_blobs"

    hash: str = Field(sa_column=_c(String, primary_key=True))
    data: bytes = Field(sa_column=_c(LargeBinary, nullable=False))
    size: int = Field(sa_column=_c(BigInteger, nullable=False))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class FileVersionTable(SQLModel, table=True):
    """One change of a thread's file: a write, a directory made, or a deletion (``op``).

    The filesystem after any moment is, per path, its newest version from then or before
    (without the deleted ones).
    """

    __tablename__ = "file_versions"
    __table_args__ = (
        Index("ix_file_versions_thread_path", "thread_id", "path", "seq"),
        Index("ix_file_versions_thread_created", "thread_id", "created_at"),
    )

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    path: str = Field(sa_column=_c(String, nullable=False))
    op: str = Field(sa_column=_c(String, nullable=False))
    is_directory: bool = Field(default=False, sa_column=_c(Boolean, nullable=False, default=False))
    mime_type: str = Field(sa_column=_c(String, nullable=False))
    storage: str = Field(default="local", sa_column=_c(String, nullable=False, default="local"))
    location: str | None = Field(default=None, sa_column=_c(String))
    size: int = Field(default=0, sa_column=_c(BigInteger, nullable=False, default=0))
    blob: str | None = Field(default=None, sa_column=_c(String))
    meta: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    width: int | None = Field(default=None, sa_column=_c(Integer))
    height: int | None = Field(default=None, sa_column=_c(Integer))
    file_created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class StateVersionTable(SQLModel, table=True):
    """One change of a thread value (``kind`` ``value``) or registry entry (``kind`` ``child``).

    ``value`` is the new JSON value (``deleted``: the key was removed); the values and the
    registry after any moment are, per key, the newest version from then or before.
    """

    __tablename__ = "state_versions"
    __table_args__ = (
        Index("ix_state_versions_thread_key", "thread_id", "kind", "key", "seq"),
        Index("ix_state_versions_thread_created", "thread_id", "created_at"),
    )

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    kind: str = Field(sa_column=_c(String, nullable=False))
    key: str = Field(sa_column=_c(String, nullable=False))
    value: Any = Field(default=None, sa_column=_c(JSON))
    deleted: bool = Field(default=False, sa_column=_c(Boolean, nullable=False, default=False))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class LineageTable(SQLModel, table=True):
    """A fork, rewind or replay: what a thread came from, or what was done to it.

    ``thread_id`` is the thread made (a fork, a replay) or changed (a rewind); ``source_id``
    the thread it came from; ``message_id`` the message of the cut; ``data`` the details
    (a rewind's timelines before and after).
    """

    __tablename__ = "thread_lineage"
    __table_args__ = (
        Index("ix_thread_lineage_thread_created", "thread_id", "created_at"),
        Index("ix_thread_lineage_source_created", "source_id", "created_at"),
    )

    id: str = Field(sa_column=_c(String, primary_key=True))
    kind: str = Field(sa_column=_c(String, nullable=False))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    source_id: str | None = Field(default=None, sa_column=_c(String))
    message_id: str | None = Field(default=None, sa_column=_c(String))
    data: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class QueueTable(SQLModel, table=True):
    """A message queued for a thread's next step."""

    __tablename__ = "queue"
    __table_args__ = (Index("ix_queue_thread_created", "thread_id", "created_at"),)

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    id: str = Field(sa_column=_c(String, nullable=False, unique=True))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    role: str = Field(sa_column=_c(String, nullable=False))
    content: str = Field(sa_column=_c(String, nullable=False))
    attachments: list[Any] | None = Field(default=None, sa_column=_c(_json()))
    silent: bool = Field(default=False, sa_column=_c(Boolean, nullable=False, default=False))
    meta: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class EffectTable(SQLModel, table=True):
    """A scheduled effect: ``pending`` → ``processing`` → ``completed`` | ``failed``."""

    __tablename__ = "effects"
    __table_args__ = (
        Index("ix_effects_status_scheduled", "status", "scheduled_at"),
        Index("ix_effects_thread_created", "thread_id", "created_at"),
    )

    id: str = Field(sa_column=_c(String, primary_key=True))
    thread_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    name: str = Field(sa_column=_c(String, nullable=False))
    args: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    scheduled_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    status: str = Field(default="pending", sa_column=_c(String, nullable=False, default="pending"))
    error: str | None = Field(default=None, sa_column=_c(String))
    started_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    finished_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    attempts: int = Field(default=0, sa_column=_c(Integer, nullable=False, default=0))
    """How many times a run was claimed (the current run's attempt number)."""
    owner: str | None = Field(default=None, sa_column=_c(String))
    """The worker running a ``processing`` effect (reset when that worker's heartbeat stops)."""


class ChildTable(SQLModel, table=True):
    """One entry of a parent thread's subagent registry (the entry itself is JSON)."""

    __tablename__ = "children"
    __table_args__ = (Index("ix_children_parent_created", "parent_id", "created_at"),)

    parent_id: str = Field(sa_column=_c(String, _thread_fk(), primary_key=True))
    reference: str = Field(sa_column=_c(String, primary_key=True))
    entry: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    hidden_by: str | None = Field(default=None, sa_column=_c(String))
    """The rewind that hid the entry (its child was created after the rewind's cut)."""


class EnvRequestTable(SQLModel, table=True):
    """A pending scoped-variable request of a parent thread."""

    __tablename__ = "env_requests"
    __table_args__ = (Index("ix_env_requests_parent_created", "parent_id", "created_at"),)

    id: str = Field(sa_column=_c(String, primary_key=True))
    parent_id: str = Field(sa_column=_c(String, _thread_fk(), nullable=False))
    payload: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class ValueTable(SQLModel, table=True):
    """A thread key/value entry (JSON value)."""

    __tablename__ = "thread_values"
    __table_args__ = (
        Index("ix_thread_values_thread_created", "thread_id", "created_at"),
        Index("ix_thread_values_key", "key"),
    )

    thread_id: str = Field(sa_column=_c(String, _thread_fk(), primary_key=True))
    key: str = Field(sa_column=_c(String, primary_key=True))
    value: Any = Field(default=None, sa_column=_c(JSON))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    updated_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class ExecutionTable(SQLModel, table=True):
    """A thread's execution record: the turn it owes and the point a restart resumes from.

    ``record`` is an :class:`sa_core.engine.record.ExecutionRecord` as JSON; ``status`` copies
    its status (not indexed: every turn changes it, and only a runtime's start looks for the
    owed records). ``claimed_by`` / ``claimed_until`` name the process running the thread (the
    claim the scale-out work turns into a lease).
    """

    __tablename__ = "executions"

    thread_id: str = Field(sa_column=_c(String, _thread_fk(), primary_key=True))
    status: str = Field(sa_column=_c(String, nullable=False))
    record: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    claimed_by: str | None = Field(default=None, sa_column=_c(String))
    claimed_until: int | None = Field(default=None, sa_column=_c(BigInteger))
    updated_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class ApiKeyTable(SQLModel, table=True):
    """An API key: its sha256 hash and a display prefix; the plaintext is never stored."""

    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_prefix", "prefix"),)

    id: str = Field(sa_column=_c(String, primary_key=True))
    name: str = Field(sa_column=_c(String, nullable=False))
    prefix: str = Field(sa_column=_c(String, nullable=False))
    key_hash: str = Field(sa_column=_c(String, nullable=False, unique=True))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    revoked_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    packages: list[str] | None = Field(default=None, sa_column=_c(_json()))
    """The packages the key opens; NULL: every package."""
    read_only: bool = Field(
        default=False, sa_column=_c(Boolean, nullable=False, server_default=false())
    )
    """The key may list and read but not write."""


class LeaseTable(SQLModel, table=True):
    """Which worker executes a thread, until when (renewed by the worker's heartbeat)."""

    __tablename__ = "thread_leases"
    __table_args__ = (Index("ix_thread_leases_expires", "expires_at"),)

    thread_id: str = Field(sa_column=_c(String, _thread_fk(), primary_key=True))
    owner: str = Field(sa_column=_c(String, nullable=False))
    expires_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    acquired_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class WorkerTable(SQLModel, table=True):
    """A worker process and its last heartbeat."""

    __tablename__ = "workers"

    id: str = Field(sa_column=_c(String, primary_key=True))
    started_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    heartbeat_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class StreamFrameTable(SQLModel, table=True):
    """A stream frame too large for a NOTIFY payload, fetched by the workers it is relayed to."""

    __tablename__ = "stream_frames"
    __table_args__ = (Index("ix_stream_frames_created", "created_at"),)

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    thread_id: str = Field(sa_column=_c(String, nullable=False))
    frame: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class ScheduleTable(SQLModel, table=True):
    """A schedule of a package and where it stands (see :class:`sa_core.spec.ScheduleRecord`).

    ``status`` is ``active``, ``paused`` or ``deleted`` (a pack's schedule deleted at run time,
    kept so that the next start does not bring it back). A due run is claimed by moving
    ``next_run_at`` on from the value read (compare-and-set) in the transaction that stores
    the run's thread and message.
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_status_next", "status", "next_run_at"),)

    package: str = Field(sa_column=_c(String, primary_key=True))
    name: str = Field(sa_column=_c(String, primary_key=True))
    agent: str = Field(sa_column=_c(String, nullable=False))
    message: str = Field(sa_column=_c(String, nullable=False))
    cron: str | None = Field(default=None, sa_column=_c(String))
    every: str | None = Field(default=None, sa_column=_c(String))
    timezone: str = Field(sa_column=_c(String, nullable=False))
    thread: str = Field(sa_column=_c(String, nullable=False))
    description: str = Field(default="", sa_column=_c(String, nullable=False, default=""))
    status: str = Field(sa_column=_c(String, nullable=False))
    source: str = Field(sa_column=_c(String, nullable=False))
    next_run_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    last_run_at: int | None = Field(default=None, sa_column=_c(BigInteger))
    last_thread_id: str | None = Field(default=None, sa_column=_c(String))
    thread_id: str | None = Field(default=None, sa_column=_c(String))
    runs: int = Field(default=0, sa_column=_c(Integer, nullable=False, default=0))
    last_error: str | None = Field(default=None, sa_column=_c(String))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    updated_at: int = Field(sa_column=_c(BigInteger, nullable=False))


class StoreItemTable(SQLModel, table=True):
    """An item of a package's store: a JSON document under a namespace and a key.

    ``namespace`` holds the namespace's labels, each followed by the unit separator U+001F (a
    prefix of labels is then a prefix of the column). ``text`` is the document's searchable
    text, indexed by the FTS5 table ``store_items_fts`` on SQLite (its rowid is ``seq``) and
    by a GIN index on ``to_tsvector('simple', text)`` on PostgreSQL (:data:`STORE_TEXT_DDL`).
    """

    __tablename__ = "store_items"
    __table_args__ = (
        Index("ux_store_items_key", "package", "namespace", "key", unique=True),
        Index("ix_store_items_expires", "expires_at"),
    )

    seq: int | None = Field(default=None, sa_column=_c(_Seq, primary_key=True, autoincrement=True))
    package: str = Field(sa_column=_c(String, nullable=False))
    namespace: str = Field(sa_column=_c(String, nullable=False))
    key: str = Field(sa_column=_c(String, nullable=False))
    value: dict[str, Any] | None = Field(default=None, sa_column=_c(_json()))
    text: str = Field(default="", sa_column=_c(String, nullable=False, default=""))
    created_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    updated_at: int = Field(sa_column=_c(BigInteger, nullable=False))
    expires_at: int | None = Field(default=None, sa_column=_c(BigInteger))


class StoreVectorTable(SQLModel, table=True):
    """The vector of a store item, for search by meaning (one per item, ``seq`` its item's).

    ``model`` names the embedding model that made it (``provider:model``): a search compares
    only vectors of the pack's model now. ``embedding`` holds float32 values: a little-endian
    blob on SQLite (what ``sqlite-vec``'s functions read), a ``real[]`` on PostgreSQL (cast to
    pgvector's ``vector`` when searched), so the schema needs neither extension.
    """

    __tablename__ = "store_vectors"

    seq: int = Field(
        sa_column=_c(
            _Seq,
            ForeignKey("store_items.seq", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        )
    )
    model: str = Field(sa_column=_c(String, nullable=False))
    embedding: bytes = Field(
        sa_column=_c(LargeBinary().with_variant(ARRAY(REAL()), "postgresql"), nullable=False)
    )


STORE_TEXT_DDL = {
    "sqlite": "CREATE VIRTUAL TABLE IF NOT EXISTS store_items_fts USING fts5(text)",
    "postgresql": (
        "CREATE INDEX IF NOT EXISTS ix_store_items_text ON store_items "
        "USING GIN (to_tsvector('simple', text))"
    ),
}
"""The full-text index of ``store_items`` per dialect (created with the table)."""
STORE_TEXT_OBJECTS = ("store_items_fts", "ix_store_items_text")
"""Names of the full-text objects (SQLite's FTS5 table and its shadow tables start with the
first): they are not SQLAlchemy tables or indexes, so schema comparisons leave them out."""


def _table(name: str) -> Table:
    return SQLModel.metadata.tables[name]


threads = _table("threads")
thread_tags = _table("thread_tags")
messages = _table("messages")
logs = _table("logs")
files = _table("files")
file_blobs = _table("file_blobs")
file_versions = _table("file_versions")
state_versions = _table("state_versions")
thread_lineage = _table("thread_lineage")
queue = _table("queue")
effects = _table("effects")
children = _table("children")
env_requests = _table("env_requests")
thread_values = _table("thread_values")
api_keys = _table("api_keys")
executions = _table("executions")
thread_leases = _table("thread_leases")
stream_frames = _table("stream_frames")
workers = _table("workers")
schedules = _table("schedules")
store_items = _table("store_items")
store_vectors = _table("store_vectors")

_ddl: Any = DDL  # untyped in SQLAlchemy
for _dialect, _statement in STORE_TEXT_DDL.items():
    event.listen(store_items, "after_create", _ddl(_statement).execute_if(dialect=_dialect))
event.listen(
    store_items,
    "before_drop",
    _ddl("DROP TABLE IF EXISTS store_items_fts").execute_if(dialect="sqlite"),
)

PER_THREAD_TABLES: tuple[tuple[Table, str], ...] = (
    (thread_tags, "thread_id"),
    (messages, "thread_id"),
    (logs, "thread_id"),
    (files, "thread_id"),
    (file_versions, "thread_id"),
    (state_versions, "thread_id"),
    (thread_lineage, "thread_id"),
    (queue, "thread_id"),
    (effects, "thread_id"),
    (children, "parent_id"),
    (env_requests, "parent_id"),
    (thread_values, "thread_id"),
    (executions, "thread_id"),
    (thread_leases, "thread_id"),
)
"""Every table holding rows of a thread, with the column naming the thread."""
