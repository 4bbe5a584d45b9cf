"""``sa plugins``: installed plugins and what each registered."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``plugins`` command."""
    parser = subparsers.add_parser("plugins", help="List plugins and what they register.")
    parser.set_defaults(func=plugins_command)


def plugins_command(args: argparse.Namespace) -> int:
    """Entry point of ``sa plugins``."""
    from sa_core.plugins import create_plugin_host

    host = create_plugin_host(load_entrypoints=True)
    by_plugin: dict[str, list[str]] = {}
    for registration in host.registrations:
        by_plugin.setdefault(registration.plugin, []).append(
            f"{registration.kind} {registration.name}"
        )
    for name in host.plugin_names():
        items = by_plugin.get(name, [])
        print(f"{name}: {', '.join(items) if items else 'lifecycle hooks only'}")
    return 0
