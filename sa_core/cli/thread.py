"""``sa thread ACTION``: work on a stored thread (see ``docs/time-travel.md``).

``sa thread fork ID [--at MSG]`` forks a thread (after message MSG, else its latest) and
prints the new thread's id; ``sa thread rewind ID --to MSG`` rewinds a thread in place;
``sa thread export ID -o FILE`` and ``sa thread import FILE`` write a thread tree as an
``sa-thread/1`` document and recreate one (:mod:`sa_core.cli.thread_transfer`). They find the
database and the installed packs the way ``sa serve`` does (``--db``, default
``sqlite:///.sa/sa.db``; ``--pack`` for packs that are not installed) and run no turn, effect
or schedule themselves: a server on the same database keeps its work.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sa_core.cli import thread_transfer
from sa_core.cli.stored import add_store_options, open_runtime


def register(subparsers: Any) -> None:
    """Add the ``thread`` command and its actions to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "thread",
        help="fork, rewind, export or import a stored thread",
        description=(
            "Work on a stored thread of the database 'sa serve' uses (--db, default "
            "sqlite:///.sa/sa.db)."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    fork = _action(actions, "fork", "fork a thread: a new thread sharing its history up to MSG")
    fork.add_argument("--at", metavar="MSG", default=None, help="the message to cut after (latest)")
    fork.set_defaults(func=fork_thread)
    rewind = _action(actions, "rewind", "rewind a thread in place to message MSG")
    rewind.add_argument("--to", metavar="MSG", required=True, help="the message to go back to")
    rewind.set_defaults(func=rewind_thread)
    thread_transfer.register_actions(actions)


def _action(actions: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text)
    sub.add_argument("thread_id", metavar="ID", help="the thread")
    add_store_options(sub)
    sub.add_argument("--json", action="store_true", help="print the result as JSON")
    return sub


async def fork_thread(args: argparse.Namespace) -> int:
    """Fork a thread; print the new thread's id."""
    async with open_runtime(args) as runtime:
        source = await runtime.get_thread(args.thread_id)
        fork = await source.fork(at=args.at)
        if args.json:
            print(json.dumps({"id": fork.thread_id, "source": source.thread_id, "at": args.at}))
        else:
            where = f"after message {args.at}" if args.at else "at its latest message"
            print(f"Forked thread {source.thread_id} {where}:", file=sys.stderr)
            print(fork.thread_id)
    return 0


async def rewind_thread(args: argparse.Namespace) -> int:
    """Rewind a thread in place; print what left its history."""
    async with open_runtime(args) as runtime:
        thread = await runtime.get_thread(args.thread_id)
        record = await thread.rewind(to=args.to)
        if args.json:
            print(json.dumps(record.model_dump(mode="json")))
        else:
            rewound, hidden = record.data["rewound"], record.data["hidden"]
            print(
                f"Rewound thread {thread.thread_id} to message {args.to}: {rewound} message(s) "
                f"left its history, {len(hidden)} child thread(s) stopped and hidden "
                f"(undo: sa thread rewind {thread.thread_id} --to <a later message>)."
            )
    return 0
