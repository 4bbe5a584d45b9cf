"""``sa replay FILE_OR_ID``: run a recorded thread again from its recording and compare.

The argument is an exported ``sa-thread/1`` file (``sa thread export``) or the id of a thread
in the database; the replay runs on a new thread of that database (``--db``, the installed
packs and ``--pack`` ones, as ``sa serve`` finds them), with every model answer served from
the recording. Exit 0 when the replay did what the recording did; 1 with the first divergence
printed (``--all``: every one) when it did not. See docs/time-travel.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sa_core.cli.stored import add_store_options, open_runtime
from sa_core.cli.thread_transfer import read_document


def register(subparsers: Any) -> None:
    """Add the ``replay`` command to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="replay a recorded thread (file or id) and report the first divergence",
        description=(
            "Run a recorded thread again with every model answer from its recording; exit 0 "
            "when identical, 1 with the divergence printed."
        ),
    )
    parser.add_argument(
        "source", metavar="FILE_OR_ID", help="an exported sa-thread/1 file, or a thread id"
    )
    parser.add_argument(
        "--tools",
        choices=["recorded", "execute"],
        default="recorded",
        help="serve each tool's recorded result, or run the tools again (recorded)",
    )
    parser.add_argument(
        "--all",
        dest="stop_at_first",
        action="store_false",
        help="go on after the first divergence and report every one",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_store_options(parser)
    parser.set_defaults(func=replay_command)


async def replay_command(args: argparse.Namespace) -> int:
    """Replay and print the report; exit 0 when identical, 1 otherwise."""
    source: Any = args.source
    if source == "-" or Path(source).is_file():
        source = read_document(source)
    async with open_runtime(args, work=True) as runtime:
        report = await runtime.replay_thread(
            source, tools=args.tools, stop_at_first=args.stop_at_first
        )
    if args.json:
        print(json.dumps(report.to_json(), indent=1, ensure_ascii=False))
    else:
        print(report)
        for divergence in report.divergences[1:]:
            print(f"\nthen: {divergence}")
    return 0 if report.identical else 1
