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

Each check prints every offender as ``path:line: what``. There is no allow-list: the rules hold
everywhere (:data:`THIRD_PARTY_INTERNALS` names the only private names reached, a dependency's).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sa_core", "sa_hooks", "sa_providers")
ENGINE = "sa_core/engine/"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
FORBIDDEN_IN_ENGINE = ("sa_core.runtime", "sa_core.state")

LAZY_EXTRAS = frozenset(
    {
        "asyncpg",
        "alembic",
        "mcp",
        "mcp_types",
        "opentelemetry",
        "PIL",
        "a2a",
        "yaml",
        "sqlite_vec",
        "sqlean",
    }
)
"""Top-level modules a function may import lazily: the optional extras (``postgres``, ``mcp``
and its ``mcp_types``, ``otel``, ``images``, ``a2a``, ``chat``, ``vectors``), and alembic, which costs
~90 ms to import and is needed only while a database schema is migrated."""

LAZY_MODULES = frozenset({"sqlalchemy.ext.asyncio", "sqlalchemy.dialects.postgresql"})
"""Modules (and their submodules) a function may import lazily although their package is a
dependency, because only an optional path uses them and they are costly: SQLAlchemy's asyncio
extension imports SQLAlchemy's ORM (~50 ms) and only the async backends (PostgreSQL, aiosqlite)
use it; SQLAlchemy's PostgreSQL dialect (~20 ms) only PostgreSQL statements, built on first
use. The default SQLite store loads neither."""


def lazy_import_allowed(module: str) -> bool:
    """Whether a function may import ``module``: an optional extra or a :data:`LAZY_MODULES`."""
    if module.split(".")[0] in LAZY_EXTRAS:
        return True
    return any(module == lazy or module.startswith(lazy + ".") for lazy in LAZY_MODULES)


PUBLIC_UNDERSCORE = frozenset(
    {"_asdict", "_replace", "_fields", "_make", "_field_defaults", "_mapping"}
)
"""Documented public API that starts with an underscore (namedtuples, SQLAlchemy's
``Row._mapping``)."""

THIRD_PARTY_INTERNALS = frozenset(
    {
        "sa_core/store/fast.py: reaches adapter._handle_exception",
        "sa_core/store/migrate.py: reaches script._upgrade_revs",
    }
)
"""Not an allow-list: private API of a dependency with no public equivalent (SQLAlchemy's asyncpg
adapter translating a driver error; the revision walk alembic's own ``upgrade`` command uses)."""


@dataclass(frozen=True, order=True)
class Offence:
    """One rule broken at one place."""

    path: str
    line: int
    what: str

    @property
    def key(self) -> str:
        """The offence without its line number (which moves with edits)."""
        return f"{self.path}: {self.what}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


# --- the scanner --------------------------------------------------------------------------


def module_name(path: str) -> str:
    """``sa_core/store/backend.py`` -> ``sa_core.store.backend`` (a package: its name)."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def absolute(path: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if not path.endswith("__init__.py"):
        package.pop()
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported(path: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """Every module an import statement may bind (``from a import b``: ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    module = absolute(path, node)
    yield module
    for alias in node.names:
        yield f"{module}.{alias.name}"


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function and method, nested ones included."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def is_private(name: str) -> bool:
    """A single-underscore name (not a dunder, not ``_`` alone)."""
    return name.startswith("_") and not name.startswith("__") and name != "_"


def engine_imports(path: str, tree: ast.AST) -> list[Offence]:
    """(a) An engine module importing the Runtime or ThreadState, or reaching ``.runtime``."""
    if not path.startswith(ENGINE):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for module in imported(path, node):
                if any(module == f or module.startswith(f + ".") for f in FORBIDDEN_IN_ENGINE):
                    found.append(Offence(path, node.lineno, f"imports {module}"))
        elif isinstance(node, ast.Attribute) and node.attr == "runtime":
            found.append(Offence(path, node.lineno, f"reaches {ast.unparse(node)}"))
    return found


def own_privates(tree: ast.AST) -> set[str]:
    """The private names a module defines itself (see the module docstring, rule b)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            names.update(
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant)
                if isinstance(c.value, str)
            )
    return {name for name in names if is_private(name)}


def module_aliases(path: str, tree: ast.AST) -> dict[str, str]:
    """Local names bound to imported modules: ``import a.b as c`` -> ``{c: a.b}``.

    ``from pkg import mod`` counts when ``pkg/mod.py`` (or ``pkg/mod/``) is a file of this
    repository; ``import a.b`` binds ``a``.
    """
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            module = absolute(path, node)
            folder = ROOT / module.replace(".", "/")
            for alias in node.names:
                if (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir():
                    aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
    return aliases


def private_reach(path: str, tree: ast.AST) -> list[Offence]:
    """(b) A private name of another module: imported, or reached as an attribute."""
    own = own_privates(tree)
    modules = module_aliases(path, tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = absolute(path, node)
            for alias in node.names:
                if is_private(alias.name):
                    found.append(Offence(path, node.lineno, f"imports {module}.{alias.name}"))
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            if node.attr in PUBLIC_UNDERSCORE:
                continue
            target = node.value
            if isinstance(target, ast.Name) and target.id in modules:
                what = f"reaches {modules[target.id]}.{node.attr}"
            elif (
                isinstance(target, ast.Name) and target.id in ("self", "cls")
            ) or node.attr in own:
                continue
            else:
                what = f"reaches {ast.unparse(target)}.{node.attr}"
            found.append(Offence(path, node.lineno, what))
    return found


def long_file(path: str, source: str) -> list[Offence]:
    """(c) A file over :data:`MAX_FILE_LINES` lines."""
    lines = len(source.splitlines())
    if lines <= MAX_FILE_LINES:
        return []
    return [Offence(path, lines, f"{lines} lines (at most {MAX_FILE_LINES})")]


def long_functions(path: str, tree: ast.AST) -> list[Offence]:
    """(d) An engine function over :data:`MAX_FUNCTION_LINES` lines (its ``def`` to its end)."""
    if not path.startswith(ENGINE):
        return []
    found = []
    for node in functions(tree):
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_FUNCTION_LINES:
            found.append(Offence(path, node.lineno, f"{node.name}() is {length} lines"))
    return found


def imports_in_functions(
    node: ast.AST, function: str | None = None
) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import inside a function, with the name of the innermost function holding it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)) and function is not None:
            yield child, function
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        yield from imports_in_functions(child, inner or function)


def function_imports(path: str, tree: ast.AST) -> list[Offence]:
    """(e) An import inside a function of the engine or the store (optional extras aside)."""
    if not path.startswith((ENGINE, "sa_core/store/")):
        return []
    found = []
    for node, function in imports_in_functions(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            modules = [absolute(path, node)]
        if all(lazy_import_allowed(module) for module in modules):
            continue
        names = ", ".join(modules)
        found.append(Offence(path, node.lineno, f"imports {names} in {function}()"))
    return found


def sources() -> Iterator[tuple[str, str]]:
    """Every Python file of the three packages: its repository path and its text."""
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            yield file.relative_to(ROOT).as_posix(), file.read_text(encoding="utf-8")


TreeCheck = Callable[[str, ast.AST], list[Offence]]


def scan(check: TreeCheck) -> list[Offence]:
    """Run one tree check over every source file."""
    found = []
    for path, source in sources():
        found += check(path, ast.parse(source, path))
    return found


def report(found: list[Offence], rule: str, excused: frozenset[str] = frozenset()) -> None:
    """Fail naming every offender (but the ``excused`` keys)."""
    new = sorted(offence for offence in found if offence.key not in excused)
    assert not new, f"{len(new)} offender(s) of '{rule}':\n" + "\n".join(map(str, new))


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
