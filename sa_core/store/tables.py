"""The store's tables: SQLAlchemy Core ``Table`` objects in one :data:`metadata`.

Column types are portable (SQLite and PostgreSQL): integer microsecond timestamps in
``BigInteger``, JSON documents in ``JSON``, file bytes in ``LargeBinary``. Every table listed
per thread has an index on ``(thread_id, created_at)``. Child rows reference ``threads.id`` with
``ON DELETE CASCADE`` (the store also deletes them explicitly, so cascading never depends on
foreign keys being enforced).

Plain Core, no ORM: the queries are Core statements, and defining the tables this way keeps
SQLAlchemy's ORM (and SQLModel) out of the process; importing this module costs a few
milliseconds once SQLAlchemy is loaded.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    event,
    text,
)
from sqlalchemy.engine import Connection

metadata = MetaData()
"""Every table of the store (``create_all`` builds a new database from it)."""

PARENT_INDEX = "ix_messages_thread_parent"
WITH_PARENT = "parent_id IS NOT NULL"
"""The condition of the partial index :data:`PARENT_INDEX` on messages."""

# An autoincrement key: INTEGER PRIMARY KEY (the rowid) on SQLite, BIGINT elsewhere.
_Seq = BigInteger().with_variant(Integer(), "sqlite")


def _json() -> JSON:
    return JSON(none_as_null=True)


def _thread_fk() -> ForeignKey:
    return ForeignKey("threads.id", ondelete="CASCADE")


threads = Table(
    "threads",
    metadata,
    Column("id", String, primary_key=True),
    Column("package", String, nullable=False),
    Column("agent_id", String, nullable=False),
    Column("user_id", String, nullable=True),
    Column("parent_id", String, _thread_fk(), nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("terminated", BigInteger, nullable=True),
    Column("stopped", Boolean, nullable=False, default=False),
    Column("env", _json()),
    Column("env_types", _json()),
    Column("tags", _json()),
    Column("properties", _json()),
    Column("execution", _json()),
    Index("ix_threads_created", "created_at"),
    Index("ix_threads_parent_created", "parent_id", "created_at"),
    Index("ix_threads_package_agent_created", "package", "agent_id", "created_at"),
)
"""A thread (see :class:`sa_core.store.rows.ThreadRow`)."""

thread_tags = Table(
    "thread_tags",
    metadata,
    Column("thread_id", String, _thread_fk(), primary_key=True),
    Column("tag", String, primary_key=True),
    Index("ix_thread_tags_tag", "tag", "thread_id"),
)
"""One tag of a thread (the filter index of ``threads.tags``)."""

messages = Table(
    "messages",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    Column("thread_id", String, _thread_fk(), nullable=False),
    Column("role", String, nullable=False),
    Column("content", String),
    Column("name", String),
    Column("tool_calls", _json()),
    Column("tool_call_id", String),
    Column("log_id", String),
    Column("created_at", BigInteger, nullable=False),
    Column("request_sent_at", BigInteger),
    Column("response_completed_at", BigInteger),
    Column("status", String),
    Column("silent", Boolean, nullable=False, default=False),
    Column("tool_status", String),
    Column("reasoning_content", String),
    Column("reasoning_details", _json()),
    Column("parent_id", String),
    Column("depth", Integer, nullable=False, default=0),
    Column("prompt", String),
    Column("attachments", _json()),
    Column("meta", _json()),
    Column("subagent_id", String),
    Column("subagent_name", String),
    Column("subagent_title", String),
    Column("subagent_description", String),
    Column("subagent_status", String),
    Column("subagent_resumable", Boolean),
    Column("subagent_blocking", Boolean),
    Column("subagent_thread_name", String),
    Column("subagent_spawn_group_id", String),
    Column("extra", _json()),
    Index("ix_messages_thread_created", "thread_id", "created_at"),
    # only messages with a parent (a subprompt's): a top-level insert writes no page here;
    # partial on PostgreSQL too (see _postgresql_options)
    Index(PARENT_INDEX, "thread_id", "parent_id", sqlite_where=text(WITH_PARENT)),
)
"""A message, with every field of the spec's Message (``meta`` holds ``metadata``)."""


def _postgresql_options(target: Table, connection: Connection, **_: Any) -> None:
    """Give the messages' indexes their PostgreSQL options as PostgreSQL creates the table.

    Declared with the table, ``postgresql_where`` would import SQLAlchemy's PostgreSQL dialect
    (~20 ms: SQLAlchemy loads a dialect to check its options) in every process, SQLite ones
    included. ``create_all`` calls this before it creates the table and its indexes.
    """
    if connection.dialect.name != "postgresql":
        return
    for index in target.indexes:
        if index.name == PARENT_INDEX:
            index.dialect_kwargs["postgresql_where"] = text(WITH_PARENT)


event.listen(messages, "before_create", _postgresql_options)

logs = Table(
    "logs",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    Column("thread_id", String, _thread_fk(), nullable=False),
    Column("type", String, nullable=False),
    Column("data", _json()),
    Column("created_at", BigInteger, nullable=False),
    Column("parent_id", String),
    Column("extra", _json()),
    Index("ix_logs_thread_created", "thread_id", "created_at"),
)
"""A log row (model calls, tool calls, errors)."""

files = Table(
    "files",
    metadata,
    Column("thread_id", String, _thread_fk(), primary_key=True),
    Column("path", String, primary_key=True),
    Column("parent", String, nullable=False),
    Column("name", String, nullable=False),
    Column("is_directory", Boolean, nullable=False, default=False),
    Column("mime_type", String, nullable=False),
    Column("storage", String, nullable=False, default="local"),
    Column("location", String),
    Column("size", BigInteger, nullable=False, default=0),
    Column("data", LargeBinary),
    Column("meta", _json()),
    Column("width", Integer),
    Column("height", Integer),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_files_thread_parent", "thread_id", "parent"),
    Index("ix_files_thread_created", "thread_id", "created_at"),
)
"""A file (bytes in ``data``) or directory (``is_directory``) of a thread's filesystem."""

queue = Table(
    "queue",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    Column("thread_id", String, _thread_fk(), nullable=False),
    Column("role", String, nullable=False),
    Column("content", String, nullable=False),
    Column("attachments", _json()),
    Column("silent", Boolean, nullable=False, default=False),
    Column("meta", _json()),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_queue_thread_created", "thread_id", "created_at"),
)
"""A message queued for a thread's next step."""

effects = Table(
    "effects",
    metadata,
    Column("id", String, primary_key=True),
    Column("thread_id", String, _thread_fk(), nullable=False),
    Column("name", String, nullable=False),
    Column("args", _json()),
    Column("scheduled_at", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("status", String, nullable=False, default="pending"),
    Column("error", String),
    Column("started_at", BigInteger),
    Column("finished_at", BigInteger),
    # how many times a run was claimed (the current run's attempt number)
    Column("attempts", Integer, nullable=False, default=0),
    # the worker running a ``processing`` effect (reset when that worker's heartbeat stops)
    Column("owner", String),
    Index("ix_effects_status_scheduled", "status", "scheduled_at"),
    Index("ix_effects_thread_created", "thread_id", "created_at"),
)
"""A scheduled effect: ``pending`` → ``processing`` → ``completed`` | ``failed``."""

children = Table(
    "children",
    metadata,
    Column("parent_id", String, _thread_fk(), primary_key=True),
    Column("reference", String, primary_key=True),
    Column("entry", _json()),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_children_parent_created", "parent_id", "created_at"),
)
"""One entry of a parent thread's subagent registry (the entry itself is JSON)."""

env_requests = Table(
    "env_requests",
    metadata,
    Column("id", String, primary_key=True),
    Column("parent_id", String, _thread_fk(), nullable=False),
    Column("payload", _json()),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_env_requests_parent_created", "parent_id", "created_at"),
)
"""A pending scoped-variable request of a parent thread."""

thread_values = Table(
    "thread_values",
    metadata,
    Column("thread_id", String, _thread_fk(), primary_key=True),
    Column("key", String, primary_key=True),
    Column("value", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_thread_values_thread_created", "thread_id", "created_at"),
    Index("ix_thread_values_key", "key"),
)
"""A thread key/value entry (JSON value)."""

executions = Table(
    "executions",
    metadata,
    Column("thread_id", String, _thread_fk(), primary_key=True),
    Column("status", String, nullable=False),
    Column("record", _json()),
    Column("claimed_by", String),
    Column("claimed_until", BigInteger),
    Column("updated_at", BigInteger, nullable=False),
)
"""A thread's execution record: the turn it owes and the point a restart resumes from.

``record`` is an :class:`sa_core.store.executions.ExecutionRecord` as JSON; ``status`` copies
its status (not indexed: every turn changes it, and only a runtime's start looks for the owed
records). ``claimed_by`` / ``claimed_until`` name the process running the thread (the claim the
scale-out work turns into a lease).
"""

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False),
    Column("prefix", String, nullable=False),
    Column("key_hash", String, nullable=False, unique=True),
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger),
    Index("ix_api_keys_prefix", "prefix"),
)
"""An API key: its sha256 hash and a display prefix; the plaintext is never stored."""

thread_leases = Table(
    "thread_leases",
    metadata,
    Column("thread_id", String, _thread_fk(), primary_key=True),
    Column("owner", String, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("acquired_at", BigInteger, nullable=False),
    Index("ix_thread_leases_expires", "expires_at"),
)
"""Which worker executes a thread, until when (renewed by the worker's heartbeat)."""

workers = Table(
    "workers",
    metadata,
    Column("id", String, primary_key=True),
    Column("started_at", BigInteger, nullable=False),
    Column("heartbeat_at", BigInteger, nullable=False),
)
"""A worker process and its last heartbeat."""

stream_frames = Table(
    "stream_frames",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True),
    Column("thread_id", String, nullable=False),
    Column("frame", _json()),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_stream_frames_created", "created_at"),
)
"""A stream frame too large for a NOTIFY payload, fetched by the workers it is relayed to."""

PER_THREAD_TABLES: tuple[tuple[Table, str], ...] = (
    (thread_tags, "thread_id"),
    (messages, "thread_id"),
    (logs, "thread_id"),
    (files, "thread_id"),
    (queue, "thread_id"),
    (effects, "thread_id"),
    (children, "parent_id"),
    (env_requests, "parent_id"),
    (thread_values, "thread_id"),
    (executions, "thread_id"),
    (thread_leases, "thread_id"),
)
"""Every table holding rows of a thread, with the column naming the thread."""
