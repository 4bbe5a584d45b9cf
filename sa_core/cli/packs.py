"""``sa packs``: list the installed packs and where each came from.

Output, per pack::

    forecaster  sa-pack-forecaster 0.1.0
      author:       Ada Lovelace <ada@example.com>
      license:      MIT
      entry agents: forecaster
      from:         installed in /venv/lib/python3.11/site-packages by pip (built by sa pack)

A pack that fails to load is reported with its distribution and skipped; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``packs`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "packs",
        help="list installed packs",
        description=(
            "List every pack installed under the 'sa.packs' entry-point group: distribution, "
            "version, author, license, entry agents and where it came from."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--no-validate", action="store_true", help="list packs without validating their graphs"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``sa packs``; return 1 when any installed pack is broken."""
    from sa_core.packaging.installed import installed_pack_infos

    infos, errors = installed_pack_infos(validate=not args.no_validate)
    if args.json:
        import json
        from dataclasses import asdict

        payload = {
            "packs": [asdict(info) for info in infos],
            "errors": [{"source": e.source, "reason": e.reason} for e in errors],
        }
        print(json.dumps(payload, indent=2))
        return 1 if errors else 0
    if not infos and not errors:
        print("No packs installed (entry-point group 'sa.packs'). Create one with 'sa new pack'.")
        return 0
    for info in infos:
        release = " ".join(v for v in (info.distribution, info.version) if v)
        print(f"{info.package_id}  {release}".rstrip())
        origin = info.origin + (" (built by sa pack)" if info.packed_by_sa else "")
        rows = (
            ("author", info.author or "-"),
            ("license", info.license or "-"),
            ("entry agents", ", ".join(info.entry_agents) or "-"),
            ("from", origin),
        )
        for label, value in rows:
            print(f"  {label + ':':<13} {value}")
    for error in errors:
        print(f"broken: {error}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} pack(s) failed to load and were skipped.", file=sys.stderr)
    return 1 if errors else 0
