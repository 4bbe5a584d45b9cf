"""``sa pack SOURCE --agent NAME``: a standalone distribution for one agent's closure.

See :mod:`sa_core.packaging.packer` for the layout and the versioning rules.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.packaging.packer import PackResult


def register(subparsers: Any) -> None:
    """Add the ``pack`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "pack",
        help="pack an agent into a distribution",
        description=(
            "Take an agent's closure (its prompts and their includes, tools, models, hooks, "
            "effects, thread endpoints, subagent and handoff targets) and write a standalone "
            "distribution: pyproject.toml, the definitions module, README and LICENSE; then "
            "build the sdist and wheel and check them with twine."
        ),
    )
    parser.add_argument("source", metavar="SOURCE", help="module, .py file or project directory")
    parser.add_argument("--agent", required=True, metavar="NAME", help="the agent to pack")
    parser.add_argument("--version", help="the version (default: the agent's, bumped on re-pack)")
    parser.add_argument("--license", dest="license_id", metavar="SPDX", help="e.g. MIT")
    parser.add_argument("--author", help="'Name <email>' (default: the agent's author)")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="project directory (default: packed/<name>)"
    )
    parser.add_argument("--pack", dest="pack_name", help="the source pack, if several define NAME")
    parser.add_argument("--id", dest="package_id", help="package id (default: the agent's name)")
    parser.add_argument(
        "--no-build", action="store_true", help="write the project only; do not build or check"
    )
    parser.add_argument(
        "--with-framework",
        action="store_true",
        help="also write standard-agents' own wheel into wheels/ (for installing where the "
        "framework is not on the package index; sa publish never uploads it)",
    )
    parser.add_argument(
        "--isolated",
        action="store_true",
        default=None,
        help="build in an isolated environment (default: only when setuptools is missing)",
    )
    parser.set_defaults(func=run)


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def report(result: PackResult) -> list[str]:
    """Return the lines ``sa pack`` prints: what went in and what was written."""
    identity = result.identity
    closure = result.closure
    bump = f" (after {result.previous_version})" if result.previous_version else ""
    lines = [
        f"Packed agent '{identity.agent}' of pack '{closure.pack.name}' as "
        f"{identity.distribution} {identity.version}{bump}",
        f"  package id   {identity.package_id} (entry point {identity.package_id} = "
        f"{identity.module}:pack)",
        f"  license      {result.license_id or '- (pass --license SPDX)'}",
        f"  author       {identity.author or '-'}",
    ]
    for kind, names in closure.names().items():
        shown = [
            f"{name} ({closure.roles[name]})"
            if kind == "agents" and name in closure.roles
            else name
            for name in names
        ]
        lines.append(f"  {kind:<12} {', '.join(shown)}")
    lines += [f"  {'copied' if i == 0 else '':<12} {u}" for i, u in enumerate(result.vendored)]
    lines.append(f"  {'requires':<12} {', '.join(result.requirements)}")
    for note in closure.external:
        lines.append(f"  {'external':<12} {note}")
    for note in closure.shared_with_other_agents():
        lines.append(f"  {'shared':<12} {note} (copied)")
    lines.append(f"Wrote {_shown(result.project)}")
    for file in result.files:
        lines.append(f"  {_shown(file)}")
    if result.check_report:
        lines += [f"  {line.strip()}" for line in result.check_report.splitlines()]
        lines.append(f"Publish with: sa publish {_shown(result.project / 'dist')}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Run ``sa pack``."""
    from sa_core.packaging.packer import pack_agent

    result = pack_agent(
        args.source,
        args.agent,
        version=args.version,
        license_id=args.license_id,
        author=args.author,
        out=args.out,
        pack_name=args.pack_name,
        package_id=args.package_id,
        build=not args.no_build,
        isolated=args.isolated,
    )
    lines = report(result)
    if args.with_framework:
        from sa_core.packaging.framework import build_framework_wheel

        framework = build_framework_wheel(result.project / "wheels", isolated=args.isolated)
        wheel = next((f for f in result.files if f.suffix == ".whl"), None)
        target = _shown(wheel if wheel is not None else result.project)
        lines += [
            f"Wrote {_shown(framework)}",
            "Install where standard-agents is not on the package index with:",
            f"  pip install --find-links {_shown(framework.parent)} {target}",
        ]
    print("\n".join(lines))
    return 0
