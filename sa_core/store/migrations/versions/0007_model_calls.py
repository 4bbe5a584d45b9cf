"""Recorded model calls: each used answer's request hash and full response (time travel).

Revision ID: 0007_model_calls
Revises: 0006_store_items
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_model_calls"
down_revision = "0006_store_items"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``model_calls`` where missing."""
    if sa.inspect(op.get_bind()).has_table("model_calls"):
        return
    op.create_table(
        "model_calls",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("log_id", sa.String(), nullable=False),
        sa.Column("message_id", sa.String(), nullable=True),
        sa.Column("request_hash", sa.String(), nullable=False),
        sa.Column("request", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("response", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index(
        "ix_model_calls_thread_created", "model_calls", ["thread_id", "created_at"], unique=False
    )


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_index("ix_model_calls_thread_created", table_name="model_calls")
    op.drop_table("model_calls")
