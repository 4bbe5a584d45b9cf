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
    ARRAY,
    DDL,
    JSON,
    REAL,
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
    false,
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


def _column(name: str, *args: Any, **kwargs: Any) -> Column[Any]:
    """A column whose name is a plain ``str``, as declarative mapping names its columns.

    ``Column(name, ...)`` wraps the name in SQLAlchemy's ``quoted_name``, a ``str`` subclass:
    the row dicts keyed by such names would miss the dict lookups' fast path for plain strings,
    and a name sent as a SQL value would be bound untyped.
    """
    column: Column[Any] = Column(*args, **kwargs)
    column.name = column.key = name
    return column


def _json() -> JSON:
    return JSON(none_as_null=True)


def _thread_fk() -> ForeignKey:
    return ForeignKey("threads.id", ondelete="CASCADE")


threads = Table(
    "threads",
    metadata,
    _column("id", String, primary_key=True),
    _column("package", String, nullable=False),
    _column("agent_id", String, nullable=False),
    _column("user_id", String, nullable=True),
    _column("parent_id", String, _thread_fk(), nullable=True),
    _column("created_at", BigInteger, nullable=False),
    _column("updated_at", BigInteger, nullable=False),
    _column("terminated", BigInteger, nullable=True),
    _column("stopped", Boolean, nullable=False, default=False),
    _column("env", _json()),
    _column("env_types", _json()),
    _column("tags", _json()),
    _column("properties", _json()),
    _column("execution", _json()),
    # where a fork's or a rewound thread's history comes from (sa_core.store.timeline); NULL
    # for a thread whose history is all its own messages
    _column("timeline", _json()),
    Index("ix_threads_created", "created_at"),
    Index("ix_threads_parent_created", "parent_id", "created_at"),
    Index("ix_threads_package_agent_created", "package", "agent_id", "created_at"),
)
"""A thread (see :class:`sa_core.store.rows.ThreadRow`)."""

thread_tags = Table(
    "thread_tags",
    metadata,
    _column("thread_id", String, _thread_fk(), primary_key=True),
    _column("tag", String, primary_key=True),
    Index("ix_thread_tags_tag", "tag", "thread_id"),
)
"""One tag of a thread (the filter index of ``threads.tags``)."""

messages = Table(
    "messages",
    metadata,
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("id", String, nullable=False, unique=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("role", String, nullable=False),
    _column("content", String),
    _column("name", String),
    _column("tool_calls", _json()),
    _column("tool_call_id", String),
    _column("log_id", String),
    _column("created_at", BigInteger, nullable=False),
    _column("request_sent_at", BigInteger),
    _column("response_completed_at", BigInteger),
    _column("status", String),
    _column("silent", Boolean, nullable=False, default=False),
    _column("tool_status", String),
    _column("reasoning_content", String),
    _column("reasoning_details", _json()),
    _column("parent_id", String),
    _column("depth", Integer, nullable=False, default=0),
    _column("prompt", String),
    _column("attachments", _json()),
    _column("meta", _json()),
    _column("subagent_id", String),
    _column("subagent_name", String),
    _column("subagent_title", String),
    _column("subagent_description", String),
    _column("subagent_status", String),
    _column("subagent_resumable", Boolean),
    _column("subagent_blocking", Boolean),
    _column("subagent_thread_name", String),
    _column("subagent_spawn_group_id", String),
    _column("extra", _json()),
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
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("id", String, nullable=False, unique=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("type", String, nullable=False),
    _column("data", _json()),
    _column("created_at", BigInteger, nullable=False),
    _column("parent_id", String),
    _column("extra", _json()),
    # an llm_call log's recorded model call: the canonical request's hash, the hashes of its
    # parts and the provider's full answer (sa_core.store.modelcalls); NULL for other logs,
    # failed attempts, and calls made with recording off
    _column("recording", _json()),
    Index("ix_logs_thread_created", "thread_id", "created_at"),
)
"""A log row (model calls, tool calls, errors; a used model call's recording)."""

request_parts = Table(
    "request_parts",
    metadata,
    _column("key", String, primary_key=True),
    _column("parts", _json(), nullable=False),
    _column("created_at", BigInteger, nullable=False),
)
"""The unchanging parts of recorded model requests (the digests of the system prompt, each
tool and the settings, and their words), stored once per distinct content and shared by every
call that sent them (``logs.recording`` names its row by ``key``; sa_core.store.modelcalls)."""

files = Table(
    "files",
    metadata,
    _column("thread_id", String, _thread_fk(), primary_key=True),
    _column("path", String, primary_key=True),
    _column("parent", String, nullable=False),
    _column("name", String, nullable=False),
    _column("is_directory", Boolean, nullable=False, default=False),
    _column("mime_type", String, nullable=False),
    _column("storage", String, nullable=False, default="local"),
    _column("location", String),
    _column("size", BigInteger, nullable=False, default=0),
    _column("blob", String),
    _column("meta", _json()),
    _column("width", Integer),
    _column("height", Integer),
    _column("created_at", BigInteger, nullable=False),
    _column("updated_at", BigInteger, nullable=False),
    Index("ix_files_thread_parent", "thread_id", "parent"),
    Index("ix_files_thread_created", "thread_id", "created_at"),
)
"""A file or directory (``is_directory``) of a thread's filesystem as it is now.

A file's bytes are in ``file_blobs`` under ``blob`` (their SHA-256); every change is also kept
in ``file_versions`` (:mod:`sa_core.store.filehistory`).
"""

file_blobs = Table(
    "file_blobs",
    metadata,
    _column("hash", String, primary_key=True),
    _column("data", LargeBinary, nullable=False),
    _column("size", BigInteger, nullable=False),
    _column("created_at", BigInteger, nullable=False),
)
"""File contents, stored once per distinct content (keyed by SHA-256, shared by threads)."""

file_versions = Table(
    "file_versions",
    metadata,
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("path", String, nullable=False),
    _column("op", String, nullable=False),
    _column("is_directory", Boolean, nullable=False, default=False),
    _column("mime_type", String, nullable=False),
    _column("storage", String, nullable=False, default="local"),
    _column("location", String),
    _column("size", BigInteger, nullable=False, default=0),
    _column("blob", String),
    _column("meta", _json()),
    _column("width", Integer),
    _column("height", Integer),
    _column("file_created_at", BigInteger, nullable=False),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_file_versions_thread_path", "thread_id", "path", "seq"),
    Index("ix_file_versions_thread_created", "thread_id", "created_at"),
)
"""One change of a thread's file: a write, a directory made, or a deletion (``op``).

The filesystem after any moment is, per path, its newest version from then or before (without
the deleted ones).
"""

state_versions = Table(
    "state_versions",
    metadata,
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("kind", String, nullable=False),
    _column("key", String, nullable=False),
    _column("value", JSON),
    _column("deleted", Boolean, nullable=False, default=False),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_state_versions_thread_key", "thread_id", "kind", "key", "seq"),
    Index("ix_state_versions_thread_created", "thread_id", "created_at"),
)
"""One change of a thread value (``kind`` ``value``).

``value`` is the new JSON value (``deleted``: the key was removed); the values after any moment
are, per key, the newest version from then or before.
"""

thread_lineage = Table(
    "thread_lineage",
    metadata,
    _column("id", String, primary_key=True),
    _column("kind", String, nullable=False),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("source_id", String),
    _column("message_id", String),
    _column("data", _json()),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_thread_lineage_thread_created", "thread_id", "created_at"),
    Index("ix_thread_lineage_source_created", "source_id", "created_at"),
)
"""A fork, rewind or replay: what a thread came from, or what was done to it.

``thread_id`` is the thread made (a fork, a replay) or changed (a rewind); ``source_id`` the
thread it came from; ``message_id`` the message of the cut; ``data`` the details (a rewind's
timelines before and after).
"""

queue = Table(
    "queue",
    metadata,
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("id", String, nullable=False, unique=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("role", String, nullable=False),
    _column("content", String, nullable=False),
    _column("attachments", _json()),
    _column("silent", Boolean, nullable=False, default=False),
    _column("meta", _json()),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_queue_thread_created", "thread_id", "created_at"),
)
"""A message queued for a thread's next step."""

effects = Table(
    "effects",
    metadata,
    _column("id", String, primary_key=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("name", String, nullable=False),
    _column("args", _json()),
    _column("scheduled_at", BigInteger, nullable=False),
    _column("created_at", BigInteger, nullable=False),
    _column("status", String, nullable=False, default="pending"),
    _column("error", String),
    _column("started_at", BigInteger),
    _column("finished_at", BigInteger),
    # how many times a run was claimed (the current run's attempt number)
    _column("attempts", Integer, nullable=False, default=0),
    # the worker running a ``processing`` effect (reset when that worker's heartbeat stops)
    _column("owner", String),
    Index("ix_effects_status_scheduled", "status", "scheduled_at"),
    Index("ix_effects_thread_created", "thread_id", "created_at"),
)
"""A scheduled effect: ``pending`` → ``processing`` → ``completed`` | ``failed``."""

children = Table(
    "children",
    metadata,
    _column("parent_id", String, _thread_fk(), primary_key=True),
    _column("reference", String, primary_key=True),
    _column("entry", _json()),
    _column("created_at", BigInteger, nullable=False),
    # the rewind that hid the entry (its child was created after the rewind's cut)
    _column("hidden_by", String),
    Index("ix_children_parent_created", "parent_id", "created_at"),
)
"""One entry of a parent thread's subagent registry (the entry itself is JSON)."""

env_requests = Table(
    "env_requests",
    metadata,
    _column("id", String, primary_key=True),
    _column("parent_id", String, _thread_fk(), nullable=False),
    _column("payload", _json()),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_env_requests_parent_created", "parent_id", "created_at"),
)
"""A pending scoped-variable request of a parent thread."""

thread_values = Table(
    "thread_values",
    metadata,
    _column("thread_id", String, _thread_fk(), primary_key=True),
    _column("key", String, primary_key=True),
    _column("value", JSON),
    _column("created_at", BigInteger, nullable=False),
    _column("updated_at", BigInteger, nullable=False),
    Index("ix_thread_values_thread_created", "thread_id", "created_at"),
    Index("ix_thread_values_key", "key"),
)
"""A thread key/value entry (JSON value)."""

executions = Table(
    "executions",
    metadata,
    _column("thread_id", String, _thread_fk(), primary_key=True),
    _column("status", String, nullable=False),
    _column("record", _json()),
    _column("claimed_by", String),
    _column("claimed_until", BigInteger),
    _column("updated_at", BigInteger, nullable=False),
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
    _column("id", String, primary_key=True),
    _column("name", String, nullable=False),
    _column("prefix", String, nullable=False),
    _column("key_hash", String, nullable=False, unique=True),
    _column("created_at", BigInteger, nullable=False),
    _column("revoked_at", BigInteger),
    # the packages the key opens; NULL: every package
    _column("packages", _json()),
    # the key may list and read but not write
    _column("read_only", Boolean, nullable=False, server_default=false()),
    Index("ix_api_keys_prefix", "prefix"),
)
"""An API key: its sha256 hash and a display prefix; the plaintext is never stored."""

thread_leases = Table(
    "thread_leases",
    metadata,
    _column("thread_id", String, _thread_fk(), primary_key=True),
    _column("owner", String, nullable=False),
    _column("expires_at", BigInteger, nullable=False),
    _column("acquired_at", BigInteger, nullable=False),
    Index("ix_thread_leases_expires", "expires_at"),
)
"""Which worker executes a thread, until when (renewed by the worker's heartbeat)."""

workers = Table(
    "workers",
    metadata,
    _column("id", String, primary_key=True),
    _column("started_at", BigInteger, nullable=False),
    _column("heartbeat_at", BigInteger, nullable=False),
)
"""A worker process and its last heartbeat."""

stream_frames = Table(
    "stream_frames",
    metadata,
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("thread_id", String, nullable=False),
    _column("frame", _json()),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_stream_frames_created", "created_at"),
)
"""A stream frame too large for a NOTIFY payload, fetched by the workers it is relayed to."""

schedules = Table(
    "schedules",
    metadata,
    _column("package", String, primary_key=True),
    _column("name", String, primary_key=True),
    _column("agent", String, nullable=False),
    _column("message", String, nullable=False),
    _column("cron", String),
    _column("every", String),
    _column("timezone", String, nullable=False),
    _column("thread", String, nullable=False),
    _column("description", String, nullable=False, default=""),
    _column("status", String, nullable=False),
    _column("source", String, nullable=False),
    _column("next_run_at", BigInteger),
    _column("last_run_at", BigInteger),
    _column("last_thread_id", String),
    _column("thread_id", String),
    _column("runs", Integer, nullable=False, default=0),
    _column("last_error", String),
    _column("created_at", BigInteger, nullable=False),
    _column("updated_at", BigInteger, nullable=False),
    Index("ix_schedules_status_next", "status", "next_run_at"),
)
"""A schedule of a package and where it stands (see :class:`sa_core.spec.ScheduleRecord`).

``status`` is ``active``, ``paused`` or ``deleted`` (a pack's schedule deleted at run time, kept
so that the next start does not bring it back). A due run is claimed by moving ``next_run_at``
on from the value read (compare-and-set) in the transaction that stores the run's thread and
message.
"""

store_items = Table(
    "store_items",
    metadata,
    _column("seq", _Seq, primary_key=True, autoincrement=True),
    _column("package", String, nullable=False),
    _column("namespace", String, nullable=False),
    _column("key", String, nullable=False),
    _column("value", _json()),
    _column("text", String, nullable=False, default=""),
    _column("created_at", BigInteger, nullable=False),
    _column("updated_at", BigInteger, nullable=False),
    _column("expires_at", BigInteger),
    Index("ux_store_items_key", "package", "namespace", "key", unique=True),
    Index("ix_store_items_expires", "expires_at"),
)
"""An item of a package's store: a JSON document under a namespace and a key.

``namespace`` holds the namespace's labels, each followed by the unit separator U+001F (a
prefix of labels is then a prefix of the column). ``text`` is the document's searchable text,
indexed by the FTS5 table ``store_items_fts`` on SQLite (its rowid is ``seq``) and by a GIN
index on ``to_tsvector('simple', text)`` on PostgreSQL (:data:`STORE_TEXT_DDL`).
"""

store_vectors = Table(
    "store_vectors",
    metadata,
    _column(
        "seq",
        _Seq,
        ForeignKey("store_items.seq", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    _column("model", String, nullable=False),
    # the generic ARRAY and REAL: naming the PostgreSQL dialect's would import it on SQLite too
    _column("embedding", LargeBinary().with_variant(ARRAY(REAL()), "postgresql"), nullable=False),
)
"""The vector of a store item, for search by meaning (one per item, ``seq`` its item's).

``model`` names the embedding model that made it (``provider:model``): a search compares only
vectors of the pack's model now. ``embedding`` holds float32 values: a little-endian blob on
SQLite (what ``sqlite-vec``'s functions read), a ``real[]`` on PostgreSQL (cast to pgvector's
``vector`` when searched), so the schema needs neither extension.
"""

a2a_push = Table(
    "a2a_push",
    metadata,
    _column("task_id", String, primary_key=True),
    _column("config_id", String, primary_key=True),
    _column("thread_id", String, _thread_fk(), nullable=False),
    _column("config", _json()),
    _column("state", String),
    _column("version", Integer, nullable=False, default=0),
    _column("pending", Boolean, nullable=False, default=False),
    _column("watching", Boolean, nullable=False, default=True),
    _column("attempts", Integer, nullable=False, default=0),
    _column("next_at", BigInteger, nullable=False, default=0),
    _column("claimed_until", BigInteger),
    _column("seen_at", BigInteger, nullable=False, default=0),
    _column("last_error", String),
    _column("created_at", BigInteger, nullable=False),
    Index("ix_a2a_push_due", "pending", "next_at"),
    Index("ix_a2a_push_watching", "watching"),
    Index("ix_a2a_push_thread", "thread_id"),
)
"""A push-notification config of one of our A2A tasks, and the notification it owes.

``config`` is the client's config (``url``, ``token``, ``authentication``). ``state`` is the task
state last queued for a notification; ``pending`` says one is owed (its body is the task as stored
when it is sent), ``version`` counts the notifications queued (a send settles only the version it
claimed), ``claimed_until`` holds off other senders while one sends. ``watching`` stays true until
a final state is queued; ``seen_at`` is the thread's ``executions.updated_at`` when the task was
last read again from its thread. See :mod:`sa_core.store.a2apush`.
"""

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
    (a2a_push, "thread_id"),
)
"""Every table holding rows of a thread, with the column naming the thread."""
