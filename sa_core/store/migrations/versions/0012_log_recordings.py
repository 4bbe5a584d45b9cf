"""Recorded model calls: an ``llm_call`` log's request hash and full answer (time travel).

``logs.recording`` holds each call; ``request_parts`` the unchanging parts of the requests
(system prompt, tools, settings), once per distinct content.

Revision ID: 0012_log_recordings
Revises: 0011_evals
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_log_recordings"
down_revision = "0011_evals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``logs.recording`` and the ``request_parts`` table where missing."""
    inspector = sa.inspect(op.get_bind())
    columns = {c["name"] for c in inspector.get_columns("logs")}
    if "recording" not in columns:
        op.add_column("logs", sa.Column("recording", sa.JSON(none_as_null=True), nullable=True))
    if not inspector.has_table("request_parts"):
        op.create_table(
            "request_parts",
            sa.Column("key", sa.String(), nullable=False),
            sa.Column("parts", sa.JSON(none_as_null=True), nullable=False),
            sa.Column("created_at", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint("key"),
        )


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_table("request_parts")
    with op.batch_alter_table("logs") as batch:
        batch.drop_column("recording")
