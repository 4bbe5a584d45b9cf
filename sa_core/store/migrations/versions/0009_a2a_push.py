"""A2A push notifications: the configs of our A2A tasks and the notifications they owe.

Revision ID: 0009_a2a_push
Revises: 0008_store_vectors
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_a2a_push"
down_revision = "0008_store_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``a2a_push`` (see ``sa_core.store.tables.a2a_push``) where missing."""
    if sa.inspect(op.get_bind()).has_table("a2a_push"):
        return
    op.create_table(
        "a2a_push",
        sa.Column("task_id", sa.String(), nullable=False),
        sa.Column("config_id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("config", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("state", sa.String(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=False),
        sa.Column("watching", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.BigInteger(), nullable=False),
        sa.Column("claimed_until", sa.BigInteger(), nullable=True),
        sa.Column("seen_at", sa.BigInteger(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("task_id", "config_id"),
    )
    op.create_index("ix_a2a_push_due", "a2a_push", ["pending", "next_at"], unique=False)
    op.create_index("ix_a2a_push_watching", "a2a_push", ["watching"], unique=False)
    op.create_index("ix_a2a_push_thread", "a2a_push", ["thread_id"], unique=False)


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_index("ix_a2a_push_thread", table_name="a2a_push")
    op.drop_index("ix_a2a_push_watching", table_name="a2a_push")
    op.drop_index("ix_a2a_push_due", table_name="a2a_push")
    op.drop_table("a2a_push")
