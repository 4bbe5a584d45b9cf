"""The ``--db`` and ``--pack`` options, and the runtime they open, of stored-thread commands.

``sa thread``, ``sa replay`` and ``sa eval`` work on the database and packs ``sa serve``
would use.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sa_core.runtime import Runtime


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--db`` and ``--pack``, as ``sa serve`` has them."""
    parser.add_argument(
        "--db", metavar="URL", default=None, help="database URL (default sqlite:///.sa/sa.db)"
    )
    parser.add_argument(
        "--pack",
        dest="packs",
        action="append",
        default=[],
        metavar="MODULE_OR_PATH",
        help="also load the packs of a module, module:attribute, .py file or project directory "
        "(repeatable)",
    )


@asynccontextmanager
async def open_runtime(args: argparse.Namespace, *, work: bool = False) -> AsyncIterator[Runtime]:
    """A runtime over the packs and database ``sa serve`` would use (``--pack``, ``--db``).

    ``work=False`` (fork, rewind, export, import) runs no turn, effect or schedule of its own,
    so a server on the same database keeps its work; a replay runs its own threads' turns
    (``work=True``). A pack that fails to load is named on standard error.
    """
    from sa_core.packloader import load_packs_from
    from sa_core.runtime import Runtime

    packs = [pack for target in args.packs for pack in load_packs_from(target)]
    async with Runtime(packs=packs, database_url=args.db, work=work) as runtime:
        for error in runtime.pack_errors:
            print(f"warning: {error}", file=sys.stderr)
        yield runtime
