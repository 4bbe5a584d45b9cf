"""The durable engine: execution records per thread, attempts of effects.

Databases created by a release with the durable engine but before migrations existed already
have both (they are taken as the baseline and upgraded through 0002); this revision adds only
what is missing.

Revision ID: 0003_executions
Revises: 0002_workers
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_executions"
down_revision = "0002_workers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``executions`` and ``effects.attempts`` where missing."""
    inspector = sa.inspect(op.get_bind())
    columns = {column["name"] for column in inspector.get_columns("effects")}
    if "attempts" not in columns:
        # existing rows start at 0 runs (the server default fills them)
        op.add_column(
            "effects", sa.Column("attempts", sa.Integer(), nullable=False, server_default="0")
        )
    if not inspector.has_table("executions"):
        op.create_table(
            "executions",
            sa.Column("thread_id", sa.String(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("record", sa.JSON(none_as_null=True), nullable=True),
            sa.Column("claimed_by", sa.String(), nullable=True),
            sa.Column("claimed_until", sa.BigInteger(), nullable=True),
            sa.Column("updated_at", sa.BigInteger(), nullable=False),
            sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("thread_id"),
        )
        op.create_index("ix_executions_status", "executions", ["status"], unique=False)


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_index("ix_executions_status", table_name="executions")
    op.drop_table("executions")
    with op.batch_alter_table("effects") as batch:
        batch.drop_column("attempts")
