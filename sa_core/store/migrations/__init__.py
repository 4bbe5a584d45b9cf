"""Alembic revisions of the store's schema (applied by :mod:`sa_core.store.migrate`)."""
