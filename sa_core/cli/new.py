"""``sa new pack NAME``: scaffold a pack project (see :mod:`sa_core.packaging.scaffold`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``new`` command and its ``pack`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "new", help="create a new project", description="Create a new project from a template."
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    pack: argparse.ArgumentParser = kinds.add_parser(
        "pack",
        help="a pack project",
        description=(
            "Create a pack project: pyproject.toml with the sa.packs entry point, a module with "
            "definitions, a test using sa_core.testing, and a README. Install it with "
            "'pip install -e NAME[test]' and run its tests with pytest."
        ),
    )
    pack.add_argument("name", metavar="NAME", help="the distribution name, e.g. weather-desk")
    pack.add_argument("--dir", type=Path, default=None, help="parent directory (default: here)")
    pack.add_argument("--author", help="'Name <email>'")
    pack.add_argument("--license", dest="license_id", metavar="SPDX", help="e.g. MIT")
    pack.add_argument("--description", help="one line describing the pack")
    pack.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``sa new pack``."""
    from sa_core.packaging.scaffold import scaffold_pack

    project = scaffold_pack(
        args.name,
        args.dir,
        author=args.author,
        license_id=args.license_id,
        description=args.description,
    )
    print(f"Created {project}")
    print("Next:")
    print(f"  pip install -e '{project}[test]'")
    print(f"  pytest {project}")
    print(f"  sa validate {project}")
    return 0
