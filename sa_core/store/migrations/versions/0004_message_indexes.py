"""Two message indexes fewer to write: one dropped, one kept only for messages with a parent.

- ``ix_messages_thread_depth_created`` ``(thread_id, depth, created_at)`` is dropped. Every
  query it served (a thread's history, its pages of messages) reads the rows of one thread in
  ``(created_at, seq)`` order, which ``ix_messages_thread_created`` already gives (the row id
  ends every SQLite index), with ``depth`` checked on the way.
- ``ix_messages_thread_parent`` ``(thread_id, parent_id)`` now holds only messages that have a
  parent (a subprompt's): it serves lookups by parent id, and a thread's top-level messages,
  nearly all of them, are no longer written to it.

Each index cost a page write per inserted message: on SQLite, about one write-ahead-log page
in twenty of a model step each.

Revision ID: 0004_message_indexes
Revises: 0003_executions
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_message_indexes"
down_revision = "0003_executions"
branch_labels = None
depends_on = None

DEPTH = "ix_messages_thread_depth_created"
PARENT = "ix_messages_thread_parent"
WITH_PARENT = sa.text("parent_id IS NOT NULL")


def upgrade() -> None:
    """Drop the depth index, and make the parent index partial."""
    names = {index["name"] for index in sa.inspect(op.get_bind()).get_indexes("messages")}
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
    """Create both indexes as they were."""
    op.drop_index(PARENT, table_name="messages")
    op.create_index(PARENT, "messages", ["thread_id", "parent_id"], unique=False)
    op.create_index(DEPTH, "messages", ["thread_id", "depth", "created_at"], unique=False)
