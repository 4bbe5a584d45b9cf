"""The engine's import cycles: its strongly connected components, for a reviewer to read.

Run: ``python benchmarks/engine_scc.py``. Scans ``sa_core/engine/`` (the source, nothing is
imported) and prints every group of modules that import one another in a circle, twice: with
the run-time imports only, then with the typing imports (``if TYPE_CHECKING``) as well. The one
typing import left out is the declared exception of ``tests/test_architecture.py``'s ``LAYERS``
contract: the kernel's typing imports of the services it holds.

Only the documented turn loop may remain (``docs/architecture.md``): a step runs tool calls, a
subprompt tool runs a nested flow, which runs steps. The script exits 1 when anything else forms
a cycle.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "sa_core" / "engine"
PREFIX = "sa_core.engine."
KERNEL = "kernel"
TURN_LOOP = frozenset(
    {"turn.dispatch", "turn.flow", "turn.resume", "turn.step", "turn.subprompts", "turn.toolcall"}
)
"""The documented cycle (module names relative to ``sa_core.engine``)."""


def engine_modules() -> dict[str, Path]:
    """Every engine module by its name relative to ``sa_core.engine`` (packages left out)."""
    found = {}
    for path in sorted(ENGINE.rglob("*.py")):
        if path.name != "__init__.py":
            found[".".join(path.relative_to(ENGINE).with_suffix("").parts)] = path
    return found


def typing_nodes(tree: ast.AST) -> set[int]:
    """The ids of the import statements under an ``if TYPE_CHECKING:``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for inner in node.body:
                found |= {id(n) for n in ast.walk(inner)}
    return found


def targets(name: str, node: ast.Import | ast.ImportFrom, modules: Iterable[str]) -> set[str]:
    """The engine modules one import statement of module ``name`` loads."""
    known = set(modules)
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = ("sa_core.engine." + name).split(".")[: -node.level]
            base = ".".join([*package, base] if base else package)
        wanted = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    found = {w.removeprefix(PREFIX) for w in wanted if w.startswith(PREFIX)}
    return found & known


def graph(with_typing: bool) -> dict[str, set[str]]:
    """Module -> the engine modules it imports."""
    modules = engine_modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing = typing_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if id(node) in typing and (not with_typing or name == KERNEL):
                continue
            edges[name] |= targets(name, node, modules) - {name}
    return edges


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    """Print the cycles; 1 when one is not the documented turn loop."""
    sys.setrecursionlimit(10_000)
    unexpected = False
    for label, with_typing in (("run-time imports", False), ("with typing imports", True)):
        found = components(graph(with_typing))
        print(f"{label}: {len(found)} cycle(s)")
        for component in found:
            documented = set(component) == TURN_LOOP
            unexpected |= not documented
            note = "the documented turn loop" if documented else "NOT DOCUMENTED"
            print(f"  {note}: {', '.join(component)}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
