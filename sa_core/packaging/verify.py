"""Check a generated project in a fresh interpreter: ``python -m sa_core.packaging.verify DIR``.

Prints one JSON object: ``{"packs": [{"name", "entry_agents", "problems"}]}`` or
``{"error": "..."}``. Running in a fresh interpreter proves the generated package imports on
its own, without the modules the packing process had already imported.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.spec import Pack


def environment(exclude: Sequence[str] = ()) -> tuple[list[str], list[Pack]]:
    """Plugin tool names and installed packs (except ``exclude``), to validate against.

    A broken plugin only makes plugin tools unknown; broken installed packs are left out.
    """
    from sa_core.packloader import installed_packs

    known_tools: list[str] = []
    try:
        from sa_core.plugins import create_plugin_host

        known_tools = list(create_plugin_host().tools)
    except Exception:
        known_tools = []
    installed, _ = installed_packs(validate=False)
    return known_tools, [p for _, p in installed if p.name not in exclude]


def inspect_project(directory: str) -> dict[str, Any]:
    """Load the project's packs and validate them against installed packs and plugin tools."""
    from sa_core.errors import PackValidationError, SAError
    from sa_core.packloader import load_packs_from

    try:
        packs = load_packs_from(directory)
    except SAError as exc:
        return {"error": str(exc)}
    known_tools, known = environment([p.name for p in packs])
    report = []
    for pack in packs:
        problems: list[str] = []
        try:
            pack.validate(known_tools=known_tools, known_packs=[*known, *packs])
        except PackValidationError as exc:
            problems = list(exc.problems)
        report.append(
            {"name": pack.name, "entry_agents": pack.entry_agent_names(), "problems": problems}
        )
    return {"packs": report}


def main(argv: list[str]) -> int:
    """Entry point; prints the report as JSON."""
    print(json.dumps(inspect_project(argv[0])))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
