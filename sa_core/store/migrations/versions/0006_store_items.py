"""The packs' stores: namespaced JSON documents with full-text search (``state.store``).

Revision ID: 0006_store_items
Revises: 0005_schedules
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_store_items"
down_revision = "0005_schedules"
branch_labels = None
depends_on = None

FULL_TEXT = {
    "sqlite": "CREATE VIRTUAL TABLE IF NOT EXISTS store_items_fts USING fts5(text)",
    "postgresql": (
        "CREATE INDEX IF NOT EXISTS ix_store_items_text ON store_items "
        "USING GIN (to_tsvector('simple', text))"
    ),
}
"""As ``sa_core.store.tables.STORE_TEXT_DDL`` (a revision keeps its own copy)."""


def upgrade() -> None:
    """Add ``store_items`` and its full-text index where missing."""
    bind = op.get_bind()
    if not sa.inspect(bind).has_table("store_items"):
        op.create_table(
            "store_items",
            sa.Column(
                "seq",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                autoincrement=True,
                nullable=False,
            ),
            sa.Column("package", sa.String(), nullable=False),
            sa.Column("namespace", sa.String(), nullable=False),
            sa.Column("key", sa.String(), nullable=False),
            sa.Column("value", sa.JSON(none_as_null=True), nullable=True),
            sa.Column("text", sa.String(), nullable=False),
            sa.Column("created_at", sa.BigInteger(), nullable=False),
            sa.Column("updated_at", sa.BigInteger(), nullable=False),
            sa.Column("expires_at", sa.BigInteger(), nullable=True),
            sa.PrimaryKeyConstraint("seq"),
        )
        op.create_index(
            "ux_store_items_key", "store_items", ["package", "namespace", "key"], unique=True
        )
        op.create_index("ix_store_items_expires", "store_items", ["expires_at"], unique=False)
    statement = FULL_TEXT.get(bind.dialect.name)
    if statement is not None:
        op.execute(statement)


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.execute("DROP TABLE IF EXISTS store_items_fts")
    op.drop_index("ix_store_items_expires", table_name="store_items")
    op.drop_index("ux_store_items_key", table_name="store_items")
    op.drop_table("store_items")
