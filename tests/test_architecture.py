"""The architecture rules, checked on the source (an AST scan; nothing is imported).

(a) Nothing under ``sa_core/engine/`` imports ``sa_core.runtime`` or ``sa_core.state`` (in any
    form, ``TYPE_CHECKING`` included) or touches an attribute named ``runtime``.
(b) No module reaches another module's private (single underscore) name: no
    ``from m import _x``, no ``module._x``, no ``obj._x`` unless this module defines ``_x``
    itself (a function, a class, a class attribute, a ``self._x``/``cls._x`` assignment, a
    ``__slots__`` entry); ``self._x`` and ``cls._x`` are always the object's own business.
(c) No file under ``sa_core/``, ``sa_hooks/`` or ``sa_providers/`` is over 600 lines.
(d) No function under ``sa_core/engine/`` is over 80 lines.
(e) No import inside a function under ``sa_core/engine/`` or ``sa_core/store/``, except of an
    optional extra (:data:`LAZY_EXTRAS`) or of a costly module only an optional path uses
    (:data:`LAZY_MODULES`).
(f) The modules under ``sa_core/server/`` form no import cycle (run-time, typing and
    function-local imports alike).
(g) No Python file under ``tests/`` is over 600 lines either.

Each check prints every offender as ``path:line: what``. There is no allow-list: the rules hold
everywhere (:data:`THIRD_PARTY_INTERNALS` names the only private names reached, a dependency's).
The scanner (the rules' constants, the checks and :func:`report`) is ``architecture_scan.py``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest
from architecture_scan import (
    ENGINE,
    FLOW_OWNER,
    MAX_FILE_LINES,
    MAX_FUNCTION_LINES,
    ROOT,
    THIRD_PARTY_INTERNALS,
    Offence,
    TreeCheck,
    absolute,
    engine_imports,
    flow_assignments,
    function_imports,
    imported,
    long_file,
    long_functions,
    module_name,
    private_reach,
    report,
    scan,
    sources,
)

# --- the rules on the repository --------------------------------------------------------------


def test_the_engine_imports_neither_the_runtime_nor_the_thread_state() -> None:
    report(scan(engine_imports), "engine imports runtime/state")


def test_no_module_reaches_another_modules_private_names() -> None:
    report(scan(private_reach), "private names stay in their module", THIRD_PARTY_INTERNALS)


def test_no_file_is_over_600_lines() -> None:
    found = [offence for path, source in sources() for offence in long_file(path, source)]
    report(found, f"files of at most {MAX_FILE_LINES} lines")


def test_no_engine_function_is_over_80_lines() -> None:
    report(scan(long_functions), "engine functions of at most 80 lines")


def test_no_import_inside_a_function_of_the_engine_or_the_store() -> None:
    report(scan(function_imports), "imports at module level")


def test_only_the_turn_modules_assign_a_running_flows_attributes() -> None:
    report(scan(flow_assignments), f"a flow's state is changed by its methods outside {FLOW_OWNER}")


ISOLATED_IMPORTS = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    # the engine afresh; the layers below it stay loaded (their tables are defined once)
    for loaded in [m for m in sys.modules if m.startswith("sa_core.engine")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ImportError as exc:
        failed.append(f"{name}: {exc}")
print("\\n".join(failed))
"""


def test_every_engine_module_imports_on_its_own() -> None:
    """A cycle of module-level imports breaks the import of whichever module comes first."""
    names = [module_name(path) for path, _ in sources() if path.startswith(ENGINE)]
    done = subprocess.run(
        [sys.executable, "-c", ISOLATED_IMPORTS, *names],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert done.stdout.strip() == ""


# --- LAYERS: the engine's groups, each importing only the groups below it -------------------
#
# The engine is a small root (the vocabulary: kernel, thread handles, events, flow types and
# views, messages, files, secrets, variables, placement, the child link) under groups by
# concern. A module imports, at run time or for typing alike, only modules of its own group
# and of the groups below it; the check names every import that points up.

LAYERS = (
    "root",
    "tools",
    "model",
    "remote",
    "delivery",
    "subagents",
    "turn",
    "workers",
    "timeline",
)
"""The engine's groups, bottom to top. ``root`` is the modules directly under
``sa_core/engine/``; every other group is the sub-package of that name."""

KERNEL = "sa_core/engine/kernel.py"
"""The one declared exception: the kernel's typing imports (``if TYPE_CHECKING``) of the
services it holds (scheduler, schedules, effects, model caller, MCP, prompt caches), which
live in the groups above the root. Its run-time imports follow the rule like any other."""


def engine_group(module: str) -> str | None:
    """The group of an engine module (or of a name in it), else ``None`` (not the engine)."""
    if module != "sa_core.engine" and not module.startswith("sa_core.engine."):
        return None
    parts = module.split(".")[2:]
    if not parts:
        return "root"
    return parts[0] if parts[0] in LAYERS[1:] else "root"


def typing_imports(tree: ast.AST) -> set[int]:
    """The ids of the import statements under an ``if TYPE_CHECKING:``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for inner in node.body:
                found |= {
                    id(n) for n in ast.walk(inner) if isinstance(n, ast.Import | ast.ImportFrom)
                }
    return found


def upward_imports(path: str, tree: ast.AST) -> list[Offence]:
    """An engine module importing a module of a group above its own (typing included)."""
    own = engine_group(module_name(path)) if path.startswith(ENGINE) else None
    if own is None:
        return []
    typing = typing_imports(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if path == KERNEL and id(node) in typing:
            continue
        for module in imported(path, node):
            group = engine_group(module)
            if group is not None and LAYERS.index(group) > LAYERS.index(own):
                kind = "for typing " if id(node) in typing else ""
                what = f"{own} imports {module} {kind}from {group}, a group above it"
                found.append(Offence(path, node.lineno, what))
    return found


def test_engine_groups_import_only_the_groups_below_them() -> None:
    report(scan(upward_imports), "LAYERS: " + " < ".join(LAYERS))


def test_every_engine_module_belongs_to_a_group_of_the_layers() -> None:
    engine = ROOT / ENGINE
    packages = sorted(p.name for p in engine.iterdir() if (p / "__init__.py").exists())
    assert set(packages) <= set(LAYERS[1:]), f"sub-packages not in LAYERS: {packages}"


def test_every_engine_file_the_architecture_doc_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w/])(?:sa_core/)?(engine/[\w/]+\.py)", text))
    assert named, "docs/architecture.md names no engine file"
    missing = sorted(path for path in named if not (ROOT / "sa_core" / path).exists())
    assert missing == [], f"docs/architecture.md names engine files that do not exist: {missing}"


@pytest.mark.parametrize(
    "source",
    [
        "from sa_core.engine.turn.flow import Flow",
        "from sa_core.engine.turn import flow",
        "import sa_core.engine.turn.step",
        "from ..turn.flow import Flow",
        "if TYPE_CHECKING:\n    from sa_core.engine.turn.flow import Flow",
    ],
)
def test_the_layer_rule_catches_an_upward_import_in_every_form(source: str) -> None:
    assert offences(upward_imports, "sa_core/engine/tools/approvals.py", source)


def test_the_layer_rule_passes_imports_down_and_spares_only_the_kernels_typing_imports() -> None:
    down = "from sa_core.engine.kernel import Kernel\nfrom sa_core.engine.tools import tools"
    assert offences(upward_imports, "sa_core/engine/model/modelcall.py", down) == []
    typing = "if TYPE_CHECKING:\n    from sa_core.engine.workers.scheduler import Scheduler"
    assert offences(upward_imports, KERNEL, typing) == []
    assert offences(upward_imports, "sa_core/engine/threads.py", typing)
    found = offences(upward_imports, KERNEL, "from sa_core.engine.workers import scheduler")
    assert found == [
        f"{KERNEL}:1: root imports sa_core.engine.workers from workers, a group above it",
        f"{KERNEL}:1: root imports sa_core.engine.workers.scheduler from workers, a group above it",
    ]


# --- the scanner on synthetic sources ---------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "flow.unanswered = []",
        "flow.turns += 1",
        "flow.prepared: object = None",
        "prepared, flow.prepared = flow.prepared, None",
        "thread.execution.stopped = True",
        "runner.flow.current_side = 'b'",
    ],
)
def test_the_flow_rule_catches_every_form_of_assignment(source: str) -> None:
    found = offences(flow_assignments, "sa_core/engine/tools/toolrows.py", source)
    assert found and found[0].startswith("sa_core/engine/tools/toolrows.py:1: assigns ")


def test_the_flow_rule_spares_the_turn_modules_methods_and_other_objects() -> None:
    source = "flow.answered(call.id)\nflow.context['k'] = 1\nthread.execution = None\nx.turns = 2"
    assert offences(flow_assignments, "sa_core/engine/tools/toolrows.py", source) == []
    assert offences(flow_assignments, "sa_core/engine/turn/step.py", "flow.unanswered = []") == []


def offences(check: TreeCheck, path: str, source: str) -> list[str]:
    """What ``check`` reports for ``source`` as the file ``path``."""
    return [str(offence) for offence in sorted(check(path, ast.parse(source)))]


@pytest.mark.parametrize(
    "source",
    [
        "from sa_core.runtime import Runtime",
        "import sa_core.state as st",
        "from sa_core import state",
        "from .. import runtime",
        "from ..state import ThreadState",
        "if TYPE_CHECKING:\n    from sa_core.runtime import Runtime",
        "def f():\n    from sa_core.state import ThreadState",
        "def f(state):\n    return state.runtime.store",
    ],
)
def test_the_engine_rule_catches_every_form(source: str) -> None:
    assert offences(engine_imports, "sa_core/engine/flow.py", source)


def test_the_engine_rule_passes_clean_engine_code_and_applies_to_the_engine_only() -> None:
    clean = "from sa_core.engine.kernel import Kernel\nfrom sa_core.store import Store\nx.runtimes"
    assert offences(engine_imports, "sa_core/engine/flow.py", clean) == []
    outside = "from sa_core.runtime import Runtime\nstate.runtime"
    assert offences(engine_imports, "sa_core/server/app.py", outside) == []
    found = offences(engine_imports, "sa_core/engine/flow.py", "import sa_core.state as st")
    assert found == ["sa_core/engine/flow.py:1: imports sa_core.state"]


def test_the_private_rule_catches_imports_module_attributes_and_foreign_objects() -> None:
    source = "\n".join(
        [
            "from sa_core.store.messages import _HISTORY",
            "from sa_core.engine.turn import flow",
            "import sa_core.store.fast as fast",
            "flow._store_tool_row()",
            "fast._plan",
            "def g(prepared):",
            "    return prepared._plan(1)",
        ]
    )
    assert offences(private_reach, "sa_core/server/app.py", source) == [
        "sa_core/server/app.py:1: imports sa_core.store.messages._HISTORY",
        "sa_core/server/app.py:4: reaches sa_core.engine.turn.flow._store_tool_row",
        "sa_core/server/app.py:5: reaches sa_core.store.fast._plan",
        "sa_core/server/app.py:7: reaches prepared._plan",
    ]


def test_the_private_rule_lets_a_module_use_its_own_privates() -> None:
    source = "\n".join(
        [
            "_cache = {}",
            "class Box:",
            "    __slots__ = ('_items',)",
            "    def __init__(self):",
            "        self._count = 0",
            "    def _helper(self): ...",
            "def merge(a, b):",
            "    a._items += b._items",
            "    return a._count + b._helper() + len(_cache)",
            "row._mapping, point._replace(x=1), type(a).__name__, a.__dict__",
        ]
    )
    assert offences(private_reach, "sa_core/box.py", source) == []


def test_the_length_rules_count_lines() -> None:
    assert long_file("sa_core/x.py", "x = 1\n" * MAX_FILE_LINES) == []
    assert [str(o) for o in long_file("sa_core/x.py", "x = 1\n" * (MAX_FILE_LINES + 1))] == [
        f"sa_core/x.py:{MAX_FILE_LINES + 1}: {MAX_FILE_LINES + 1} lines (at most 600)"
    ]
    body = "    x = 1\n"
    fits = "def f():\n" + body * (MAX_FUNCTION_LINES - 1)
    assert offences(long_functions, "sa_core/engine/x.py", fits) == []
    assert offences(long_functions, "sa_core/engine/x.py", fits + body) == [
        "sa_core/engine/x.py:1: f() is 81 lines"
    ]
    assert offences(long_functions, "sa_core/server/x.py", fits + body) == []


def test_the_function_import_rule_spares_module_level_and_optional_extras() -> None:
    source = "\n".join(
        [
            "import json",
            "def connect():",
            "    import asyncpg",
            "    from alembic.config import Config",
            "    from sa_core.store.fast import Prepared",
            "    async def inner():",
            "        import os",
            "def engine():",
            "    from sqlalchemy.ext.asyncio import create_async_engine",
            "    from sqlalchemy.ext import compiler",
            "    from sqlalchemy.ext.asynciox import y",
        ]
    )
    assert offences(function_imports, "sa_core/store/x.py", source) == [
        "sa_core/store/x.py:5: imports sa_core.store.fast in connect()",
        "sa_core/store/x.py:7: imports os in inner()",
        "sa_core/store/x.py:10: imports sqlalchemy.ext in engine()",
        "sa_core/store/x.py:11: imports sqlalchemy.ext.asynciox in engine()",
    ]
    assert offences(function_imports, "sa_core/server/x.py", source) == []


def test_an_offender_fails_with_its_place_unless_excused() -> None:
    found = [Offence("sa_core/engine/a.py", 3, "imports sa_core.runtime")]
    report(found, "rule", frozenset({"sa_core/engine/a.py: imports sa_core.runtime"}))
    with pytest.raises(AssertionError, match=r"sa_core/engine/a.py:3: imports sa_core.runtime"):
        report(found, "rule")


# --- no import cycle in the server --------------------------------------------------------
# (f) The modules under ``sa_core/server/`` form no import cycle, counting every import:
#     module level, ``TYPE_CHECKING`` and inside functions alike. ``from pkg import mod`` is an
#     edge to the module ``pkg.mod``; the import of a package that Python runs before any of
#     its submodules is not counted (it is the same for every submodule), a name taken from a
#     package's ``__init__`` is.

SERVER = "sa_core/server/"


def import_targets(path: str, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The ``known`` modules an import statement names (a submodule rather than its package)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & known
    module = absolute(path, node)
    named = {f"{module}.{alias.name}" for alias in node.names} & known
    takes_names = len(named) < len(node.names)
    return named | ({module} & known if takes_names else set())


def import_graph(files: dict[str, str]) -> dict[str, dict[str, Offence]]:
    """Module -> each module it imports, with its first import (``files``: path -> text)."""
    names = {module_name(path): path for path in files}
    known = set(names)
    graph: dict[str, dict[str, Offence]] = {name: {} for name in names}
    for name, path in names.items():
        for node in ast.walk(ast.parse(files[path], path)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in sorted(import_targets(path, node, known) - {name}):
                    edge = Offence(path, node.lineno, f"imports {target}")
                    graph[name].setdefault(target, edge)
    return graph


def strongly_connected(graph: dict[str, dict[str, Offence]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def import_cycles(files: dict[str, str]) -> list[str]:
    """Each cycle: its modules, then every import inside it as ``path:line: imports x``."""
    graph = import_graph(files)
    cycles = []
    for component in strongly_connected(graph):
        edges = sorted(
            edge
            for module in component
            for target, edge in graph[module].items()
            if target in component
        )
        lines = [f"cycle of {len(component)} modules: {', '.join(component)}"]
        cycles.append("\n".join(lines + [f"  {edge}" for edge in edges]))
    return cycles


def test_the_server_modules_import_each_other_without_a_cycle() -> None:
    files = {path: source for path, source in sources() if path.startswith(SERVER)}
    cycles = import_cycles(files)
    assert not cycles, "import cycles in sa_core/server:\n" + "\n".join(cycles)


def test_the_cycle_rule_counts_typing_and_function_imports_and_names_the_cycle() -> None:
    files = {
        "sa_core/server/a.py": "from sa_core.server.b import B",
        "sa_core/server/b.py": "if TYPE_CHECKING:\n    from sa_core.server import c",
        "sa_core/server/c.py": "def f():\n    import sa_core.server.a",
        "sa_core/server/d.py": "from sa_core.server.a import A",
    }
    assert import_cycles(files) == [
        "cycle of 3 modules: sa_core.server.a, sa_core.server.b, sa_core.server.c\n"
        "  sa_core/server/a.py:1: imports sa_core.server.b\n"
        "  sa_core/server/b.py:2: imports sa_core.server.c\n"
        "  sa_core/server/c.py:2: imports sa_core.server.a"
    ]


def test_the_cycle_rule_tells_a_submodule_from_a_name_of_its_package() -> None:
    package = "from .mount import Server\nfrom sa_core.server.p import paths"
    files = {
        "sa_core/server/p/__init__.py": package,
        "sa_core/server/p/paths.py": "PREFIX = '/p'",
        "sa_core/server/p/mount.py": "from sa_core.server.p import paths",
    }
    assert import_cycles(files) == []
    files["sa_core/server/p/mount.py"] = "from sa_core.server.p import paths, PREFIX"
    assert import_cycles(files) == [
        "cycle of 2 modules: sa_core.server.p, sa_core.server.p.mount\n"
        "  sa_core/server/p/__init__.py:1: imports sa_core.server.p.mount\n"
        "  sa_core/server/p/mount.py:1: imports sa_core.server.p"
    ]


# --- test files of at most 600 lines ------------------------------------------------------
# (g) No Python file under ``tests/`` (test modules and their helpers) is over 600 lines: a
#     long test file is split by behaviour, what its parts share in a small ``*_kit.py``.


def test_no_test_file_is_over_600_lines() -> None:
    found = []
    for file in sorted((ROOT / "tests").rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        found += long_file(path, file.read_text(encoding="utf-8"))
    report(found, f"test files of at most {MAX_FILE_LINES} lines")
