"""``sa unpack DIST``: write an installed pack back into an editable project.

See :mod:`sa_core.packaging.unpacker`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``unpack`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "unpack",
        help="write an installed pack back into an editable project",
        description=(
            "Write an installed pack (by distribution name or pack id) or a wheel file back "
            "into a project with its metadata intact; edit it, then 'sa pack' it again."
        ),
    )
    parser.add_argument("dist", metavar="DIST", help="distribution name, pack id or .whl file")
    parser.add_argument("--out", type=Path, metavar="DIR", help="default: ./<distribution>")
    parser.add_argument("--force", action="store_true", help="write into a non-empty directory")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``sa unpack``."""
    from sa_core.packaging.unpacker import unpack_distribution

    result = unpack_distribution(args.dist, args.out, force=args.force)
    print(f"Unpacked {result.distribution} {result.version} into {result.project}")
    print(f"  modules       {', '.join(result.modules)} ({len(result.files)} files)")
    for name, value in result.entry_points.items():
        print(f"  entry point   {name} = {value}")
    if result.identity is not None:
        identity = result.identity
        print(f"  identity      {identity.package_id}, agent {identity.agent} (kept in _pack.json)")
        print(f"Pack again with: sa pack {result.project} --agent {identity.agent}")
    print(f"Install for development with: pip install -e {result.project}")
    return 0
