"""``sa plugins``: each installed plugin, its distribution and version, and what it registered.

Output, one line per plugin::

    sa_openai (standard-agents 0.1.0): provider openai
    sa_plugin_redact (sa-plugin-redact 0.1.0): lifecycle hooks only
"""

from __future__ import annotations

import argparse
from typing import Any

FRAMEWORK_DISTRIBUTION = "standard-agents"
BUILTIN_PLUGINS = ("sa_builtin_hooks",)


def register(subparsers: Any) -> None:
    """Add the ``plugins`` command."""
    parser = subparsers.add_parser("plugins", help="List plugins and what they register.")
    parser.set_defaults(func=plugins_command)


def plugin_distributions() -> dict[str, str]:
    """``distribution version`` by plugin name.

    Covers the entry points of group ``sa`` and the framework's built-in plugins.
    """
    from importlib.metadata import PackageNotFoundError, entry_points, version

    import sa_hooks

    found: dict[str, str] = {}
    try:
        framework = f"{FRAMEWORK_DISTRIBUTION} {version(FRAMEWORK_DISTRIBUTION)}"
    except PackageNotFoundError:  # pragma: no cover - a bare source tree
        framework = FRAMEWORK_DISTRIBUTION
    for name in BUILTIN_PLUGINS:
        found[name] = framework
    for ep in entry_points(group=sa_hooks.PROJECT):
        if ep.dist is not None:
            found.setdefault(ep.name, f"{ep.dist.name} {ep.dist.version}")
    return found


def plugins_command(args: argparse.Namespace) -> int:
    """Entry point of ``sa plugins``."""
    from sa_core.plugins import create_plugin_host

    host = create_plugin_host(load_entrypoints=True)
    distributions = plugin_distributions()
    by_plugin: dict[str, list[str]] = {}
    for registration in host.registrations:
        by_plugin.setdefault(registration.plugin, []).append(
            f"{registration.kind} {registration.name}"
        )
    for name in host.plugin_names():
        items = by_plugin.get(name, [])
        origin = distributions.get(name, "registered in code, not from a distribution")
        print(f"{name} ({origin}): {', '.join(items) if items else 'lifecycle hooks only'}")
    return 0
