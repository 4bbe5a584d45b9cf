"""Drop the messages index on ``(thread_id, depth, created_at)``.

Every query it served (a thread's history, its pages of messages) reads the rows of one thread
in ``(created_at, seq)`` order, which ``ix_messages_thread_created`` already gives (the row id
ends every SQLite index), with ``depth`` checked on the way. The index cost a page write per
inserted message: on SQLite, about one write-ahead-log page in twenty of a model step.

Revision ID: 0004_messages_depth_index
Revises: 0003_executions
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_messages_depth_index"
down_revision = "0003_executions"
branch_labels = None
depends_on = None

INDEX = "ix_messages_thread_depth_created"


def upgrade() -> None:
    """Drop the index where it exists."""
    inspector = sa.inspect(op.get_bind())
    if any(index["name"] == INDEX for index in inspector.get_indexes("messages")):
        op.drop_index(INDEX, table_name="messages")


def downgrade() -> None:
    """Create the index again."""
    op.create_index(INDEX, "messages", ["thread_id", "depth", "created_at"], unique=False)
