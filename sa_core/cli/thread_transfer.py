"""``sa thread export`` and ``sa thread import``: a stored thread tree to a file and back.

``sa thread export ID -o FILE`` writes the thread and its children as an ``sa-thread/1``
document (``-o -``: to standard output); ``sa thread import FILE`` recreates a document as a
new tree and prints its id. Both open the database and the installed packs as ``sa serve``
does (``--db``, default ``sqlite:///.sa/sa.db``; ``--pack`` loads more packs) and run no
turn, effect or schedule of their own. See docs/time-travel.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sa_core.cli.stored import add_store_options, open_runtime


def register_actions(commands: Any) -> None:
    """Add ``sa thread export`` and ``sa thread import`` to the ``sa thread`` group."""
    export = commands.add_parser(
        "export", help="write a thread tree as an sa-thread/1 JSON document"
    )
    export.add_argument("thread_id", metavar="ID", help="the root thread's id")
    export.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the file to write ('-': stdout)"
    )
    add_store_options(export)
    export.set_defaults(func=export_command)
    load = commands.add_parser("import", help="recreate an exported document as a new tree")
    load.add_argument("file", metavar="FILE", help="an sa-thread/1 JSON document ('-': stdin)")
    add_store_options(load)
    load.set_defaults(func=import_command)


def read_document(source: str) -> Any:
    """The JSON document in a file (``-``: standard input)."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return json.loads(text)


async def export_command(args: argparse.Namespace) -> int:
    """``sa thread export ID -o FILE``."""
    async with open_runtime(args) as runtime:
        thread = await runtime.get_thread(args.thread_id)
        document = await thread.export()
    text = json.dumps(document, ensure_ascii=False, indent=1)
    if args.output == "-":
        print(text)
    else:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        count = _count(document["thread"])
        print(f"Exported thread {args.thread_id} ({count} threads) to {args.output}.")
    return 0


async def import_command(args: argparse.Namespace) -> int:
    """``sa thread import FILE``: prints the new root thread's id."""
    document = read_document(args.file)
    async with open_runtime(args) as runtime:
        thread = await runtime.import_thread(document)
    print(thread.thread_id)
    return 0


def _count(node: dict[str, Any]) -> int:
    return 1 + sum(_count(child) for child in node.get("children") or [])
