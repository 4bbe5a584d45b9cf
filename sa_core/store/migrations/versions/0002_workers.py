"""Many workers: thread leases, worker heartbeats, effect owners, relayed stream frames.

Revision ID: 0002_workers
Revises: 0001_baseline
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_workers"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None

_seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add ``thread_leases``, ``workers``, ``stream_frames`` and ``effects.owner``."""
    op.add_column("effects", sa.Column("owner", sa.String(), nullable=True))
    op.create_table(
        "workers",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "thread_leases",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("owner", sa.String(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("thread_id"),
    )
    op.create_index("ix_thread_leases_expires", "thread_leases", ["expires_at"], unique=False)
    op.create_table(
        "stream_frames",
        sa.Column("seq", _seq, autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("frame", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_stream_frames_created", "stream_frames", ["created_at"], unique=False)


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_table("workers")
    with op.batch_alter_table("effects") as batch:
        batch.drop_column("owner")
    op.drop_index("ix_stream_frames_created", table_name="stream_frames")
    op.drop_table("stream_frames")
    op.drop_index("ix_thread_leases_expires", table_name="thread_leases")
    op.drop_table("thread_leases")
