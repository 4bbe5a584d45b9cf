"""Scoped API keys: ``api_keys.packages`` and ``api_keys.read_only``.

``packages`` (JSON, nullable) lists the packages a key opens; ``read_only`` (boolean) keeps it
from writing. Keys made before keep their full access: ``packages`` is NULL (every package)
and ``read_only`` false.

Revision ID: 0007_key_scopes
Revises: 0006_store_items
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_key_scopes"
down_revision = "0006_store_items"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two columns; existing keys open every package, read-write."""
    op.add_column("api_keys", sa.Column("packages", sa.JSON(none_as_null=True), nullable=True))
    op.add_column(
        "api_keys",
        sa.Column("read_only", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    """Drop the two columns (scoped keys then open everything: revoke them first)."""
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("read_only")
        batch.drop_column("packages")
