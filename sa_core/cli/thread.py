"""``sa thread``: work on one stored thread tree (see docs/time-travel.md).

Its actions: ``export`` and ``import`` (:mod:`sa_core.cli.thread_transfer`).
"""

from __future__ import annotations

import argparse
from typing import Any

from sa_core.cli import thread_transfer


def register(subparsers: Any) -> None:
    """Add the ``thread`` command group to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "thread",
        help="export or import a stored thread tree",
        description="Work on one stored thread tree. See docs/time-travel.md.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    thread_transfer.register_actions(actions)
