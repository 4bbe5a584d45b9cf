"""Schedules: agent runs started by the clock (``define_schedule``, ``runtime.schedules``).

Revision ID: 0005_schedules
Revises: 0004_write_path_indexes
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_schedules"
down_revision = "0004_write_path_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the ``schedules`` table where missing."""
    if sa.inspect(op.get_bind()).has_table("schedules"):
        return
    op.create_table(
        "schedules",
        sa.Column("package", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("cron", sa.String(), nullable=True),
        sa.Column("every", sa.String(), nullable=True),
        sa.Column("timezone", sa.String(), nullable=False),
        sa.Column("thread", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("next_run_at", sa.BigInteger(), nullable=True),
        sa.Column("last_run_at", sa.BigInteger(), nullable=True),
        sa.Column("last_thread_id", sa.String(), nullable=True),
        sa.Column("thread_id", sa.String(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("package", "name"),
    )
    op.create_index(
        "ix_schedules_status_next", "schedules", ["status", "next_run_at"], unique=False
    )


def downgrade() -> None:
    """Drop the ``schedules`` table."""
    op.drop_index("ix_schedules_status_next", table_name="schedules")
    op.drop_table("schedules")
