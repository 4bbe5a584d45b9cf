"""Evals: stored runs, their trials, and the eval model-call cache.

Revision ID: 0011_evals
Revises: 0010_time_travel
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_evals"
down_revision = "0010_time_travel"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``eval_runs``, ``eval_trials`` and ``eval_cache`` (see sa_core.store.evaltables)."""
    if sa.inspect(op.get_bind()).has_table("eval_runs"):
        return
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("suite", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("summary", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("document", sa.JSON(none_as_null=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_eval_runs_created", "eval_runs", ["created_at"])
    op.create_table(
        "eval_trials",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("case_id", sa.String(), nullable=False),
        sa.Column("trial", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("result", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "case_id", "trial"),
    )
    op.create_table(
        "eval_cache",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("trial_key", sa.String(), nullable=False),
        sa.Column("response", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_eval_cache_trial", "eval_cache", ["trial_key"])


def downgrade() -> None:
    """Drop the eval tables."""
    op.drop_table("eval_cache")
    op.drop_table("eval_trials")
    op.drop_index("ix_eval_runs_created", table_name="eval_runs")
    op.drop_table("eval_runs")
