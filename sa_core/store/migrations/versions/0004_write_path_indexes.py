"""Fewer index writes on the write path of a turn.

- ``ix_messages_thread_depth_created`` ``(thread_id, depth, created_at)`` is dropped. Every
  query it served (a thread's history, its pages of messages) reads the rows of one thread in
  ``(created_at, seq)`` order, which ``ix_messages_thread_created`` already gives (the row id
  ends every SQLite index), with ``depth`` checked on the way.
- ``ix_messages_thread_parent`` ``(thread_id, parent_id)`` now holds only messages that have a
  parent (a subprompt's): it serves lookups by parent id, and a thread's top-level messages,
  nearly all of them, are no longer written to it.
- ``ix_executions_status`` is dropped. Only a runtime's start read it (the owed and running
  records to resume, now a scan of the table), while every turn changes the status two or
  three times: each change rewrote an index page on SQLite, and on PostgreSQL an indexed
  column that changes rules out a HOT update, so every update of a record also inserted
  into both of the table's indexes.

Each message index cost a page write per inserted message: on SQLite, about one
write-ahead-log page in twenty of a model step each.

Revision ID: 0004_write_path_indexes
Revises: 0003_executions
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_write_path_indexes"
down_revision = "0003_executions"
branch_labels = None
depends_on = None

DEPTH = "ix_messages_thread_depth_created"
PARENT = "ix_messages_thread_parent"
STATUS = "ix_executions_status"
WITH_PARENT = sa.text("parent_id IS NOT NULL")


def upgrade() -> None:
    """Drop the depth and status indexes, and make the parent index partial."""
    inspector = sa.inspect(op.get_bind())
    if any(index["name"] == STATUS for index in inspector.get_indexes("executions")):
        op.drop_index(STATUS, table_name="executions")
    names = {index["name"] for index in inspector.get_indexes("messages")}
    if DEPTH in names:
        op.drop_index(DEPTH, table_name="messages")
    if PARENT in names:
        op.drop_index(PARENT, table_name="messages")
    op.create_index(
        PARENT,
        "messages",
        ["thread_id", "parent_id"],
        unique=False,
        sqlite_where=WITH_PARENT,
        postgresql_where=WITH_PARENT,
    )


def downgrade() -> None:
    """Create the three indexes as they were."""
    op.drop_index(PARENT, table_name="messages")
    op.create_index(PARENT, "messages", ["thread_id", "parent_id"], unique=False)
    op.create_index(DEPTH, "messages", ["thread_id", "depth", "created_at"], unique=False)
    op.create_index(STATUS, "executions", ["status"], unique=False)
