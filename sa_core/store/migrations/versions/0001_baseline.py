"""Baseline: the schema of every table as the store first shipped it.

Revision ID: 0001_baseline
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create every table and index."""
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("key_hash", sa.String(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
    )
    op.create_index("ix_api_keys_prefix", "api_keys", ["prefix"], unique=False)
    op.create_table(
        "threads",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("package", sa.String(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("user_id", sa.String(), nullable=True),
        sa.Column("parent_id", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("terminated", sa.BigInteger(), nullable=True),
        sa.Column("stopped", sa.Boolean(), nullable=False),
        sa.Column("env", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("env_types", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("tags", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("properties", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("execution", sa.JSON(none_as_null=True), nullable=True),
        sa.ForeignKeyConstraint(["parent_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_threads_created", "threads", ["created_at"], unique=False)
    op.create_index(
        "ix_threads_package_agent_created",
        "threads",
        ["package", "agent_id", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_threads_parent_created", "threads", ["parent_id", "created_at"], unique=False
    )
    op.create_table(
        "children",
        sa.Column("parent_id", sa.String(), nullable=False),
        sa.Column("reference", sa.String(), nullable=False),
        sa.Column("entry", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["parent_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("parent_id", "reference"),
    )
    op.create_index(
        "ix_children_parent_created", "children", ["parent_id", "created_at"], unique=False
    )
    op.create_table(
        "effects",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("args", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("scheduled_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_effects_status_scheduled", "effects", ["status", "scheduled_at"], unique=False
    )
    op.create_index(
        "ix_effects_thread_created", "effects", ["thread_id", "created_at"], unique=False
    )
    op.create_table(
        "env_requests",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("parent_id", sa.String(), nullable=False),
        sa.Column("payload", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["parent_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_env_requests_parent_created", "env_requests", ["parent_id", "created_at"], unique=False
    )
    op.create_table(
        "files",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("parent", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("is_directory", sa.Boolean(), nullable=False),
        sa.Column("mime_type", sa.String(), nullable=False),
        sa.Column("storage", sa.String(), nullable=False),
        sa.Column("location", sa.String(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.Column("meta", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("thread_id", "path"),
    )
    op.create_index("ix_files_thread_created", "files", ["thread_id", "created_at"], unique=False)
    op.create_index("ix_files_thread_parent", "files", ["thread_id", "parent"], unique=False)
    op.create_table(
        "logs",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("data", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("parent_id", sa.String(), nullable=True),
        sa.Column("extra", sa.JSON(none_as_null=True), nullable=True),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_logs_thread_created", "logs", ["thread_id", "created_at"], unique=False)
    op.create_table(
        "messages",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("content", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("tool_calls", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("tool_call_id", sa.String(), nullable=True),
        sa.Column("log_id", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("request_sent_at", sa.BigInteger(), nullable=True),
        sa.Column("response_completed_at", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(), nullable=True),
        sa.Column("silent", sa.Boolean(), nullable=False),
        sa.Column("tool_status", sa.String(), nullable=True),
        sa.Column("reasoning_content", sa.String(), nullable=True),
        sa.Column("reasoning_details", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("parent_id", sa.String(), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.String(), nullable=True),
        sa.Column("attachments", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("meta", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("subagent_id", sa.String(), nullable=True),
        sa.Column("subagent_name", sa.String(), nullable=True),
        sa.Column("subagent_title", sa.String(), nullable=True),
        sa.Column("subagent_description", sa.String(), nullable=True),
        sa.Column("subagent_status", sa.String(), nullable=True),
        sa.Column("subagent_resumable", sa.Boolean(), nullable=True),
        sa.Column("subagent_blocking", sa.Boolean(), nullable=True),
        sa.Column("subagent_thread_name", sa.String(), nullable=True),
        sa.Column("subagent_spawn_group_id", sa.String(), nullable=True),
        sa.Column("extra", sa.JSON(none_as_null=True), nullable=True),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index(
        "ix_messages_thread_created", "messages", ["thread_id", "created_at"], unique=False
    )
    op.create_index(
        "ix_messages_thread_depth_created",
        "messages",
        ["thread_id", "depth", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_messages_thread_parent", "messages", ["thread_id", "parent_id"], unique=False
    )
    op.create_table(
        "queue",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("content", sa.String(), nullable=False),
        sa.Column("attachments", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("silent", sa.Boolean(), nullable=False),
        sa.Column("meta", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_queue_thread_created", "queue", ["thread_id", "created_at"], unique=False)
    op.create_table(
        "thread_tags",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("tag", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("thread_id", "tag"),
    )
    op.create_index("ix_thread_tags_tag", "thread_tags", ["tag", "thread_id"], unique=False)
    op.create_table(
        "thread_values",
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("thread_id", "key"),
    )
    op.create_index("ix_thread_values_key", "thread_values", ["key"], unique=False)
    op.create_index(
        "ix_thread_values_thread_created",
        "thread_values",
        ["thread_id", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    """Drop every table."""
    op.drop_index("ix_thread_values_thread_created", table_name="thread_values")
    op.drop_index("ix_thread_values_key", table_name="thread_values")
    op.drop_table("thread_values")
    op.drop_index("ix_thread_tags_tag", table_name="thread_tags")
    op.drop_table("thread_tags")
    op.drop_index("ix_queue_thread_created", table_name="queue")
    op.drop_table("queue")
    op.drop_index("ix_messages_thread_parent", table_name="messages")
    op.drop_index("ix_messages_thread_depth_created", table_name="messages")
    op.drop_index("ix_messages_thread_created", table_name="messages")
    op.drop_table("messages")
    op.drop_index("ix_logs_thread_created", table_name="logs")
    op.drop_table("logs")
    op.drop_index("ix_files_thread_parent", table_name="files")
    op.drop_index("ix_files_thread_created", table_name="files")
    op.drop_table("files")
    op.drop_index("ix_env_requests_parent_created", table_name="env_requests")
    op.drop_table("env_requests")
    op.drop_index("ix_effects_thread_created", table_name="effects")
    op.drop_index("ix_effects_status_scheduled", table_name="effects")
    op.drop_table("effects")
    op.drop_index("ix_children_parent_created", table_name="children")
    op.drop_table("children")
    op.drop_index("ix_threads_parent_created", table_name="threads")
    op.drop_index("ix_threads_package_agent_created", table_name="threads")
    op.drop_index("ix_threads_created", table_name="threads")
    op.drop_table("threads")
    op.drop_index("ix_api_keys_prefix", table_name="api_keys")
    op.drop_table("api_keys")
