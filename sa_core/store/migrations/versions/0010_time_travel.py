"""Time travel: files with history, value and registry history, forks and rewinds.

File bytes move from ``files.data`` to ``file_blobs`` (one row per distinct content, keyed by
its SHA-256), and each existing file and directory gets its first ``file_versions`` row (at its
last change); each existing value its first ``state_versions`` row.
``threads.timeline``, ``children.hidden_by`` and ``thread_lineage`` record forks and rewinds.

Revision ID: 0010_time_travel
Revises: 0009_a2a_push
"""

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0010_time_travel"
down_revision = "0009_a2a_push"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _create_tables() -> None:
    op.create_table(
        "file_blobs",
        sa.Column("hash", sa.String(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("hash"),
    )
    op.create_table(
        "file_versions",
        sa.Column("seq", _SEQ, autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("op", sa.String(), nullable=False),
        sa.Column("is_directory", sa.Boolean(), nullable=False),
        sa.Column("mime_type", sa.String(), nullable=False),
        sa.Column("storage", sa.String(), nullable=False),
        sa.Column("location", sa.String(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("blob", sa.String(), nullable=True),
        sa.Column("meta", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("file_created_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_file_versions_thread_path", "file_versions", ["thread_id", "path", "seq"])
    op.create_index("ix_file_versions_thread_created", "file_versions", ["thread_id", "created_at"])
    op.create_table(
        "state_versions",
        sa.Column("seq", _SEQ, autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index(
        "ix_state_versions_thread_key", "state_versions", ["thread_id", "kind", "key", "seq"]
    )
    op.create_index(
        "ix_state_versions_thread_created", "state_versions", ["thread_id", "created_at"]
    )
    op.create_table(
        "thread_lineage",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("source_id", sa.String(), nullable=True),
        sa.Column("message_id", sa.String(), nullable=True),
        sa.Column("data", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_thread_lineage_thread_created", "thread_lineage", ["thread_id", "created_at"]
    )
    op.create_index(
        "ix_thread_lineage_source_created", "thread_lineage", ["source_id", "created_at"]
    )


def _first_versions(bind: sa.engine.Connection) -> None:
    """Blobs and first versions of the files, values and registry entries there are."""
    files = sa.table(
        "files",
        *(
            sa.column(name)
            for name in (
                "thread_id",
                "path",
                "is_directory",
                "mime_type",
                "storage",
                "location",
                "size",
                "data",
                "meta",
                "width",
                "height",
                "created_at",
                "updated_at",
            )
        ),
    )
    blobs = sa.table("file_blobs", *(sa.column(n) for n in ("hash", "data", "size", "created_at")))
    versions = sa.table(
        "file_versions",
        *(
            sa.column(n)
            for n in (
                "thread_id",
                "path",
                "op",
                "is_directory",
                "mime_type",
                "storage",
                "location",
                "size",
                "blob",
                "meta",
                "width",
                "height",
                "file_created_at",
                "created_at",
            )
        ),
    )
    seen: set[str] = set()
    for row in bind.execute(sa.select(files)).mappings().all():
        digest = None
        if not row["is_directory"]:
            data = bytes(row["data"] or b"")
            digest = hashlib.sha256(data).hexdigest()
            if digest not in seen:
                seen.add(digest)
                bind.execute(
                    blobs.insert().values(
                        hash=digest, data=data, size=len(data), created_at=row["updated_at"]
                    )
                )
            bind.execute(
                sa.text("UPDATE files SET blob = :blob WHERE thread_id = :tid AND path = :path"),
                {"blob": digest, "tid": row["thread_id"], "path": row["path"]},
            )
        bind.execute(
            versions.insert().values(
                thread_id=row["thread_id"],
                path=row["path"],
                op="mkdir" if row["is_directory"] else "write",
                is_directory=row["is_directory"],
                mime_type=row["mime_type"],
                storage=row["storage"],
                location=row["location"],
                size=row["size"],
                blob=digest,
                meta=row["meta"],
                width=row["width"],
                height=row["height"],
                file_created_at=row["created_at"],
                created_at=row["updated_at"],
            )
        )
    op.execute(
        "INSERT INTO state_versions (thread_id, kind, key, value, deleted, created_at) "
        "SELECT thread_id, 'value', key, value, false, updated_at FROM thread_values"
    )


def upgrade() -> None:
    """Add the history tables and columns, and move file bytes into ``file_blobs``.

    What is there already is left as it is (a database made by a release that has it).
    """
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    if not inspector.has_table("file_blobs"):
        _create_tables()
    added: dict[str, sa.Column[object]] = {
        "threads": sa.Column("timeline", sa.JSON(none_as_null=True), nullable=True),
        "children": sa.Column("hidden_by", sa.String(), nullable=True),
        "files": sa.Column("blob", sa.String(), nullable=True),
    }
    for table, column in added.items():
        if column.name not in {c["name"] for c in inspector.get_columns(table)}:
            with op.batch_alter_table(table) as batch:
                batch.add_column(column)
    if "data" in {c["name"] for c in inspector.get_columns("files")}:
        _first_versions(bind)
        with op.batch_alter_table("files") as batch:
            batch.drop_column("data")


def downgrade() -> None:
    """Put file bytes back in ``files.data`` and drop what :func:`upgrade` added."""
    with op.batch_alter_table("files") as batch:
        batch.add_column(sa.Column("data", sa.LargeBinary(), nullable=True))
    op.execute(
        "UPDATE files SET data = (SELECT data FROM file_blobs WHERE file_blobs.hash = files.blob)"
    )
    with op.batch_alter_table("files") as batch:
        batch.drop_column("blob")
    with op.batch_alter_table("children") as batch:
        batch.drop_column("hidden_by")
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("timeline")
    for table in ("thread_lineage", "state_versions", "file_versions", "file_blobs"):
        op.drop_table(table)
