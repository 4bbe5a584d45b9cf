"""The API keys, managed over HTTP: list, create (scoped or not) and revoke.

Only a key with full access (every package, read-write) may call these routes
(``sa_admin``, :func:`sa_core.server.auth.authorize`); a scoped key gets 403. The same as
``sa keys list|create|revoke``.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, post
from litestar.params import FromPath, JSONBody
from msgspec import Meta

from sa_core.runtime import Runtime
from sa_core.server.auth import ADMIN
from sa_core.server.context import RuntimeDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import Base, Name
from sa_core.store import ApiKeyRow

PackageName = Annotated[str, Meta(min_length=1, max_length=200)]


class KeyOut(Base, kw_only=True):
    """An API key, never its secret: the ``sa_...`` prefix identifies it."""

    id: str
    name: str
    prefix: str
    packages: list[str] | None
    """The packages the key opens; ``null``: every package."""
    read_only: bool
    created_at: int
    revoked_at: int | None


class KeysOut(Base, kw_only=True):
    """``GET /api/keys``: every key, revoked ones included, oldest first."""

    keys: list[KeyOut]


class CreateKeyIn(Base, kw_only=True):
    """A new key: a label, the packages it opens (leave out for every one), read-only or not."""

    name: Name = "default"
    packages: list[PackageName] | None = None
    read_only: bool = False


class CreatedKeyOut(KeyOut, kw_only=True):
    """The new key, with its secret ``key``: shown this once, never again."""

    key: str


def key_out(row: ApiKeyRow) -> KeyOut:
    """Describe a key without its secret."""
    return KeyOut(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        packages=None if row.packages is None else list(row.packages),
        read_only=row.read_only,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def unserved_packages_error(runtime: Runtime, packages: list[str]) -> ApiError | None:
    """A 422 naming every package that is not served (and those that are), else ``None``."""
    served = sorted(runtime.registry.scopes)
    if not packages:
        return ApiError(
            422,
            "invalid_packages",
            "'packages' is empty: list the packages the key opens, or leave it out for a key "
            f"that opens every package (served: {', '.join(served) or 'none'}).",
        )
    unknown = sorted(set(packages) - set(served))
    if not unknown:
        return None
    named = ", ".join(repr(p) for p in unknown)
    what = f"No package {named} is" if len(unknown) == 1 else f"No packages {named} are"
    return ApiError(
        422,
        "invalid_packages",
        f"{what} served here; a key can open {', '.join(served) or 'no package yet'}.",
    )


class KeysController(Controller):
    """API keys (full-access keys only)."""

    path = "/api/keys"
    tags = ["keys"]
    opt = {ADMIN: True}

    @get("/", responses=errors(), summary="List API keys")
    async def list_keys(self, runtime: RuntimeDep) -> KeysOut:
        """Every key with its scope, revoked ones included; never a secret."""
        return KeysOut(keys=[key_out(row) for row in await runtime.store.list_api_keys()])

    @post("/", status_code=201, responses=errors(422), summary="Create an API key")
    async def create_key(self, data: JSONBody[CreateKeyIn], runtime: RuntimeDep) -> CreatedKeyOut:
        """Create a key, limited to ``packages`` (each must be served) and read-only if asked.

        The answer holds the key itself (``key``) this once: hand it to the team it is for.
        """
        if data.packages is not None:
            problem = unserved_packages_error(runtime, data.packages)
            if problem is not None:
                raise problem
        token, row = await runtime.store.create_api_key(
            data.name, packages=data.packages, read_only=data.read_only
        )
        out = key_out(row)
        return CreatedKeyOut(**{f: getattr(out, f) for f in KeyOut.__struct_fields__}, key=token)

    @delete("/{key_id:str}", status_code=200, responses=errors(), summary="Revoke an API key")
    async def revoke_key(self, runtime: RuntimeDep, key_id: FromPath[str]) -> KeysOut:
        """Revoke the active key with this id or ``sa_...`` prefix; it is refused from now on.

        Answers the keys revoked (404 when no active key matches).
        """
        before = {row.id for row in await runtime.store.list_api_keys() if not row.revoked}
        if not await runtime.store.revoke_api_key(key_id):
            raise ApiError(
                404, "key_not_found", f"No active API key has the id or prefix {key_id!r}."
            )
        rows = await runtime.store.list_api_keys()
        return KeysOut(keys=[key_out(r) for r in rows if r.id in before and r.revoked])
