"""The packs' stores: a vector per item, for search by meaning (``store_vectors``).

Revision ID: 0008_store_vectors
Revises: 0007_key_scopes
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008_store_vectors"
down_revision = "0007_key_scopes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``store_vectors`` where missing (no extension needed: see the table's docstring)."""
    if sa.inspect(op.get_bind()).has_table("store_vectors"):
        return
    op.create_table(
        "store_vectors",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column(
            "embedding",
            sa.LargeBinary().with_variant(postgresql.ARRAY(postgresql.REAL()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["seq"], ["store_items.seq"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
    )


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_table("store_vectors")
