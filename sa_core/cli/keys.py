"""``sa keys create|list|revoke``: the API keys of the HTTP server.

Keys are stored hashed; ``create`` prints the key once. ``create --package NAME`` (repeatable)
limits a key to those packages and ``--read-only`` keeps it from writing: the key to hand a
team. Every command takes ``--db URL`` (default ``sqlite:///.sa/sa.db``, the database
``sa serve`` uses).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``keys`` command and its subcommands to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "keys",
        help="manage API keys of the HTTP server",
        description=(
            "Manage the HTTP server's API keys (stored hashed; a new key is printed once). "
            "Every action takes --db URL (default sqlite:///.sa/sa.db, the database 'sa serve' "
            "uses)."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
        sub.add_argument("--db", metavar="URL", default=None, help="database URL")
        return sub

    create = add("create", "create a key and print it (shown once)")
    create.add_argument("--name", default="default", help="a label for the key")
    create.add_argument(
        "--package",
        metavar="NAME",
        action="append",
        dest="packages",
        help="limit the key to this package (repeat for more); other packages answer it 404. "
        "Without it the key opens every package",
    )
    create.add_argument(
        "--read-only",
        action="store_true",
        help="the key may list and read, but not create threads, send messages, approve, set "
        "values or write files",
    )
    create.set_defaults(func=create_key)
    add("list", "list keys (never their secrets)").set_defaults(func=list_keys)
    revoke = add("revoke", "revoke a key by id, prefix or the key itself")
    revoke.add_argument(
        "key",
        metavar="ID_OR_PREFIX",
        help="the key's id, its sa_... prefix (from 'sa keys list') or the whole key",
    )
    revoke.set_defaults(func=revoke_key)


async def _store(args: argparse.Namespace) -> Any:
    from sa_core.runtime import default_database_url
    from sa_core.store import open_store

    return await open_store(args.db or default_database_url())


async def create_key(args: argparse.Namespace) -> int:
    """Create a key (scoped with ``--package`` and ``--read-only``) and print it once."""
    packages = None if args.packages is None else [p.strip() for p in args.packages]
    if packages is not None and not all(packages):
        print("error: --package needs a package name (see 'sa packs').", file=sys.stderr)
        return 2
    for name in sorted(set(packages or ()) - installed_pack_names()):
        print(
            f"note: no installed pack is named '{name}'; the key opens it once 'sa serve' "
            "serves a package of that name (with --pack, say)."
        )
    store = await _store(args)
    try:
        token, row = await store.create_api_key(
            args.name, packages=packages, read_only=args.read_only
        )
    finally:
        await store.close()
    print(
        f"Created key '{row.name}' ({row.prefix}, id {row.id}; {row.describe_access()}). "
        "It is shown only once:"
    )
    print(token)
    return 0


def installed_pack_names() -> set[str]:
    """The names of the installed packs (their ``sa.packs`` entry points; nothing is imported)."""
    from importlib.metadata import entry_points

    from sa_hooks import PACKS_GROUP

    return {ep.name for ep in entry_points(group=PACKS_GROUP)}


def _when(microseconds: int | None) -> str:
    if microseconds is None:
        return "-"
    import datetime

    moment = datetime.datetime.fromtimestamp(microseconds / 1e6, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


async def list_keys(args: argparse.Namespace) -> int:
    """Print every key: id, prefix, name, created and revoked times, and what it opens."""
    store = await _store(args)
    try:
        rows = await store.list_api_keys()
    finally:
        await store.close()
    if not rows:
        print("No API keys. Create one with 'sa keys create'.")
        return 0
    print(f"{'ID':36}  {'PREFIX':11}  {'NAME':16}  {'CREATED':20}  {'REVOKED':20}  ACCESS")
    for row in rows:
        print(
            f"{row.id:36}  {row.prefix:11}  {row.name[:16]:16}  {_when(row.created_at):20}  "
            f"{_when(row.revoked_at):20}  {row.describe_access()}"
        )
    return 0


async def revoke_key(args: argparse.Namespace) -> int:
    """Revoke a key by id, prefix or the whole key; exit code 1 when no active key matches."""
    from sa_core.store.apikeys import DISPLAY_PREFIX_CHARS, TOKEN_PREFIX

    store = await _store(args)
    target, shown = args.key, args.key
    try:
        if target.startswith(TOKEN_PREFIX) and len(target) > DISPLAY_PREFIX_CHARS:
            # the whole key: revoke the key it is, and never echo it back
            shown = target[:DISPLAY_PREFIX_CHARS] + "..."
            row = await store.verify_api_key(target)
            if row is not None:
                target, shown = row.id, row.prefix
        revoked = await store.revoke_api_key(target)
    finally:
        await store.close()
    if not revoked:
        print(f"No active key matches '{shown}' (see 'sa keys list').")
        return 1
    print(f"Revoked {shown}.")
    return 0
