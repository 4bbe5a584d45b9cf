"""Recorded model calls: an ``llm_call`` log's request hash and full answer (time travel).

Revision ID: 0011_log_recordings
Revises: 0010_time_travel
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_log_recordings"
down_revision = "0010_time_travel"
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
