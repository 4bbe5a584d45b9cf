"""The architecture scanner: parse the packages' sources and find what breaks a rule.

Each check takes a file's repository path and its parsed tree (or text) and returns every
:class:`Offence` as ``path:line: what``; :func:`report` fails naming them. Nothing is imported:
the rules are read off the source. The rules themselves are ``test_architecture.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

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


FLOW_OWNER = "sa_core/engine/turn/"
"""The turn modules: the only ones that assign a running flow's attributes."""


def holds_a_flow(node: ast.expr) -> bool:
    """Whether ``node`` names a running flow: ``flow``, or another's ``.flow`` / ``.execution``."""
    if isinstance(node, ast.Name):
        return node.id == "flow"
    return isinstance(node, ast.Attribute) and node.attr in ("flow", "execution")


def assigned_targets(node: ast.AST) -> Iterator[ast.expr]:
    """The targets an assignment statement writes, tuples unpacked."""
    if isinstance(node, ast.Assign):
        pending = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        pending = [node.target]
    else:
        return
    while pending:
        target = pending.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            pending += target.elts
        elif isinstance(target, ast.Starred):
            pending.append(target.value)
        else:
            yield target


def flow_assignments(path: str, tree: ast.AST) -> list[Offence]:
    """(f) A module outside ``engine/turn`` assigning an attribute of a running flow.

    The flow's step state is the turn modules'; the others change it through the flow's methods.
    """
    if path.startswith(FLOW_OWNER):
        return []
    found = []
    for node in ast.walk(tree):
        for target in assigned_targets(node):
            if isinstance(target, ast.Attribute) and holds_a_flow(target.value):
                what = f"assigns {ast.unparse(target)} (a method of the flow changes it)"
                found.append(Offence(path, target.lineno, what))
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
