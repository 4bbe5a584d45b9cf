"""API keys of the HTTP server: only a sha256 hash and a display prefix are stored.

A key may be scoped: limited to some packages (``packages``; ``NULL``, every package, for keys
made before scopes existed and for unscoped ones) and read-only. The server enforces the scope
(:mod:`sa_core.server.auth`); the store keeps it with the key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.fast import Prepared
from sa_core.store.interface import Transaction
from sa_core.store.rows import ApiKeyRow
from sa_core.store.storebase import StoreBase

KEYS_CHANNEL = "sa_keys"
"""PostgreSQL: notified when a key is revoked (the workers' key caches empty)."""
TOKEN_PREFIX = "sa_"
DISPLAY_PREFIX_CHARS = 11  # "sa_" and 8 random characters

_K = t.api_keys.c
_ROW_COLUMNS = (
    _K.id, _K.name, _K.prefix, _K.created_at, _K.revoked_at, _K.packages, _K.read_only
)  # fmt: skip
_ACTIVE_BY_PREFIX = Prepared(
    select(*_ROW_COLUMNS, _K.key_hash).where(
        _K.prefix == bindparam("b_prefix"), _K.revoked_at.is_(None)
    ),
    [*_ROW_COLUMNS, _K.key_hash],
)


def hash_token(token: str) -> str:
    """Return the stored form of a token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _row(row: Any) -> ApiKeyRow:
    return ApiKeyRow(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        packages=None if row.packages is None else tuple(row.packages),
        read_only=bool(row.read_only),
    )


def key_packages(packages: Iterable[str] | None) -> tuple[str, ...] | None:
    """The packages a key is limited to, sorted and unique (``None``: every package).

    Raises:
        ValueError: ``packages`` is given but empty (such a key would open nothing).
    """
    if packages is None:
        return None
    chosen = tuple(sorted(set(packages)))
    if not chosen:
        raise ValueError("A key limited to packages needs at least one package.")
    return chosen


class ApiKeysMixin(StoreBase):
    """API keys."""

    keys_epoch: int | None = None
    """PostgreSQL: counts the revocations notified on :data:`KEYS_CHANNEL` while a listener
    (a worker's, :mod:`sa_core.engine.workers.keyrevocations`) is connected; ``None`` without
    one. Changed through :meth:`revocations_heard`, :meth:`key_revoked` and
    :meth:`revocations_unheard`."""

    def revocations_heard(self) -> None:
        """A listener hears the revocations from now on: API keys may be cached."""
        self.keys_epoch = 0

    def key_revoked(self) -> None:
        """A revocation was heard: the cached keys are stale."""
        if self.keys_epoch is not None:
            self.keys_epoch += 1

    def revocations_unheard(self) -> None:
        """The listener is gone: API keys are no longer cached."""
        self.keys_epoch = None

    def _keys_version(self) -> int | None:
        """What the key cache is valid for: SQLite's data version, or the notified revocations."""
        version = self.external_version()
        return version if version is not None else self.keys_epoch

    async def create_api_key(
        self,
        name: str,
        *,
        packages: Iterable[str] | None = None,
        read_only: bool = False,
        tx: Transaction | None = None,
    ) -> tuple[str, ApiKeyRow]:
        """Create a key: ``sa_`` followed by 32 random bytes, URL-safe base64.

        Args:
            name: a label for the key.
            packages: the packages the key opens (``None``: every package).
            read_only: the key may list and read, not write.
            tx: run in this transaction.

        Returns:
            The plaintext token (shown once, never stored) and the stored row.

        Raises:
            ValueError: ``packages`` is empty.

        """
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = ApiKeyRow(
            id=str(uuid.uuid4()),
            name=name,
            prefix=token[:DISPLAY_PREFIX_CHARS],
            created_at=now_us(),
            packages=key_packages(packages),
            read_only=read_only,
        )
        stmt = insert(t.api_keys).values(
            id=row.id,
            name=name,
            prefix=row.prefix,
            key_hash=hash_token(token),
            created_at=row.created_at,
            packages=None if row.packages is None else list(row.packages),
            read_only=read_only,
        )
        await self._write(lambda conn: conn.execute(stmt), tx)
        return token, row

    async def verify_api_key(
        self, token: str, *, tx: Transaction | None = None
    ) -> ApiKeyRow | None:
        """Return the active key matching a token (hashes compared in constant time).

        Verified keys are kept in a small bounded cache (by token digest), emptied by every
        revocation of this store and whenever another process writes to the database, so a
        revoked key is refused from the moment its revocation commits. On PostgreSQL the cache
        is used only while a listener hears the revocations of every process (notified as they
        commit), so another worker refuses a revoked key once the notification arrives.
        """
        if not token.startswith(TOKEN_PREFIX):
            return None
        digest = hash_token(token)
        cache = self._caches.keys
        cached = tx is None and cache.check(self._keys_version())
        if cached:
            found = cache.get(digest)
            if found is not None:
                return found
        fillable = cached and self._cache_fillable()
        params = {"b_prefix": token[:DISPLAY_PREFIX_CHARS]}

        def op(conn: Connection) -> ApiKeyRow | None:
            found = None
            for candidate in _ACTIVE_BY_PREFIX.rows(conn, params):
                if hmac.compare_digest(candidate["key_hash"], digest):
                    packages = candidate["packages"]
                    found = ApiKeyRow(
                        id=candidate["id"],
                        name=candidate["name"],
                        prefix=candidate["prefix"],
                        created_at=candidate["created_at"],
                        packages=None if packages is None else tuple(packages),
                        read_only=bool(candidate["read_only"]),
                    )
            return found

        verified = await self._read_one(op, tx)
        if verified is not None and fillable:
            cache.put(digest, verified)
        return verified

    async def list_api_keys(self, *, tx: Transaction | None = None) -> list[ApiKeyRow]:
        """Every key, revoked ones included, oldest first."""
        stmt = select(*_ROW_COLUMNS).order_by(_K.created_at, _K.id)
        return await self._read(lambda conn: [_row(r) for r in conn.execute(stmt)], tx)

    async def revoke_api_key(self, key_id_or_prefix: str, *, tx: Transaction | None = None) -> bool:
        """Revoke the active key(s) with this id or display prefix; returns whether any was."""
        stmt = (
            update(t.api_keys)
            .where(
                or_(_K.id == key_id_or_prefix, _K.prefix == key_id_or_prefix),
                _K.revoked_at.is_(None),
            )
            .values(revoked_at=now_us())
        )

        def op(conn: Connection) -> bool:
            revoked = conn.execute(stmt).rowcount > 0
            if revoked and conn.dialect.name == "postgresql":  # delivered once this commits
                conn.execute(select(func.pg_notify(KEYS_CHANNEL, "")))
            return revoked

        self._caches.keys.clear()
        try:
            return await self._write(op, tx)
        finally:
            self._caches.keys.clear()

    async def count_api_keys(self, *, tx: Transaction | None = None) -> int:
        """Count the active (not revoked) keys."""
        stmt = select(func.count()).select_from(t.api_keys).where(_K.revoked_at.is_(None))
        return await self._read(lambda conn: int(conn.execute(stmt).scalar_one()), tx)
