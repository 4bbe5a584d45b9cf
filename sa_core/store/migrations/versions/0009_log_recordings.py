"""Recorded model calls: an ``llm_call`` log's request hash and full answer (time travel).

Revision ID: 0009_log_recordings
Revises: 0008_store_vectors
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_log_recordings"
down_revision = "0008_store_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``logs.recording`` where missing."""
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("logs")}
    if "recording" not in columns:
        op.add_column("logs", sa.Column("recording", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    with op.batch_alter_table("logs") as batch:
        batch.drop_column("recording")
