"""Find and import packs: from a module, a ``.py`` file, a project directory, or installed packages.

Two entry points, shared by ``sa validate``, ``sa run``, ``sa serve`` and ``sa packs``:

* :func:`load_packs_from` turns a command-line ``TARGET`` into packs. It raises
  :class:`~sa_core.errors.PackLoadError` with a message saying what to fix.
* :func:`installed_packs` loads every pack of the ``sa.packs`` entry-point group. A broken entry
  point (import error, not a ``Pack``, duplicate name, invalid graph) becomes a
  :class:`~sa_core.errors.PackLoadError` naming its distribution; it never takes the others down.

Neither function validates the packs it returns from a ``TARGET``; call
:meth:`sa_core.spec.Pack.validate` (``installed_packs`` does by default).

Example::

    packs = load_packs_from("my_pack")            # or "my_pack:pack", "app.py", "./my-project"
    loaded, errors = installed_packs()
    for info, pack in loaded:
        print(pack.name, "from", info.distribution, info.version)
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
import tomllib
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from sa_core.errors import PackLoadError, PackValidationError
from sa_core.spec.packs import Pack
from sa_hooks import PACKS_GROUP

__all__ = [
    "EntryPointInfo",
    "PACKS_GROUP",
    "installed_packs",
    "load_packs_from",
    "packs_in_module",
]

_MODULE_TARGET = re.compile(r"^[A-Za-z_][\w.]*(?::[A-Za-z_][\w.]*)?$")
_SKIPPED_DIRS = frozenset({"tests", "test", "docs", "build", "dist", "node_modules", "venv"})
_SKIPPED_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "__main__.py"})


@dataclass(frozen=True)
class EntryPointInfo:
    """Where an installed pack came from.

    Attributes:
        name: the entry-point name (the pack's package id).
        value: the entry-point value, ``module`` or ``module:attribute``.
        distribution: the installed distribution's name, when known.
        version: the distribution's version, when known.
        location: the project directory of an editable install, else the directory the
            distribution is installed in; ``None`` when unknown.

    """

    name: str
    value: str
    distribution: str | None = None
    version: str | None = None
    location: str | None = None

    @property
    def source(self) -> str:
        """A one-line description for messages: entry point, distribution and version."""
        where = f"entry point '{self.name} = {self.value}'"
        if self.distribution:
            where += f" of distribution {self.distribution}"
            if self.version:
                where += f" {self.version}"
        return where


# ---------------------------------------------------------------------------------------------
# Modules and packs
# ---------------------------------------------------------------------------------------------


def packs_in_module(module: ModuleType) -> list[Pack]:
    """Return every :class:`Pack` a module defines at top level, in definition order.

    A package without top-level packs is searched through its ``pack`` (or ``packs``) submodule,
    the conventional home of a pack definition.
    """
    found: list[Pack] = []
    for value in vars(module).values():
        if isinstance(value, Pack) and not any(value is p for p in found):
            found.append(value)
    if found or not hasattr(module, "__path__"):
        return found
    for sub in ("pack", "packs"):
        name = f"{module.__name__}.{sub}"
        if importlib.util.find_spec(name) is not None:
            return packs_in_module(_import_module(name, target=name))
    return []


def _describe_exception(exc: BaseException) -> str:
    """``TypeName: message (at file:line)`` for the innermost frame of a traceback."""
    if isinstance(exc, SyntaxError):  # its own position is the one that matters
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else f"line {exc.lineno}"
        return f"{type(exc).__name__}: {exc.msg} (at {where})"
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {last.filename}:{last.lineno})"
    return text


def _import_module(name: str, *, target: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise PackLoadError(
                target,
                f"no module named '{exc.name}'. Pass an importable module name (is the package "
                f"installed in this environment?), a path to a .py file, or a project directory.",
            ) from exc
        raise PackLoadError(
            target, f"importing '{name}' failed: {_describe_exception(exc)}"
        ) from exc
    except Exception as exc:
        raise PackLoadError(
            target, f"importing '{name}' failed: {_describe_exception(exc)}"
        ) from exc


def _resolve_attribute(module: ModuleType, path: str, *, target: str) -> Any:
    value: Any = module
    for part in path.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise PackLoadError(
                target, f"module '{module.__name__}' has no attribute '{path}'; check the name."
            ) from None
    return value


def _expect_pack(value: Any, *, target: str) -> Pack:
    if not isinstance(value, Pack):
        raise PackLoadError(
            target,
            f"it is a {type(value).__name__}, not a Pack; point it at a Pack object "
            f"(Pack(name=..., agents=[...], ...)).",
        )
    return value


def _load_module_target(target: str) -> list[Pack]:
    module_name, _, attribute = target.partition(":")
    module = _import_module(module_name, target=target)
    if attribute:
        return [_expect_pack(_resolve_attribute(module, attribute, target=target), target=target)]
    packs = packs_in_module(module)
    if not packs:
        raise PackLoadError(
            target,
            f"module '{module_name}' defines no Pack at top level; define one "
            f"(pack = Pack(name=...)) or pass 'module:attribute'.",
        )
    return packs


# ---------------------------------------------------------------------------------------------
# Files and directories
# ---------------------------------------------------------------------------------------------


def _add_to_sys_path(directory: Path) -> None:
    """Put a directory first on ``sys.path`` so a pack's own absolute imports work."""
    entry = str(directory)
    if entry not in sys.path:
        sys.path.insert(0, entry)


_PATH_IMPORTS: dict[str, Path] = {}
"""Top-level modules this loader imported from a path, and where from."""


def _lives_at(module: ModuleType, location: Path) -> bool:
    file = getattr(module, "__file__", None)
    return file is not None and Path(file).resolve().is_relative_to(location.resolve())


def _claim_name(name: str, location: Path, *, target: str) -> bool:
    """Make ``name`` free for importing ``location``; return whether it is already imported.

    A module of that name this loader imported from another path is forgotten (with its
    submodules), so loading ``two/pack.py`` after ``one/pack.py`` does not return the first from
    the module cache. Any other module of that name (the standard library's ``json``, an
    installed package) is left alone and the target is refused.
    """
    existing = sys.modules.get(name)
    if existing is None:
        return False
    if _lives_at(existing, location):
        return True
    if name not in _PATH_IMPORTS:
        origin = getattr(existing, "__file__", None) or "a built-in or namespace package"
        raise PackLoadError(
            target,
            f"a different module named '{name}' is already imported (from {origin}); rename "
            f"'{location.name}' so it does not shadow it.",
        )
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    return False


def _check_origin(module: ModuleType, location: Path, *, target: str) -> ModuleType:
    """Refuse a module that was found somewhere other than the expected location."""
    if not _lives_at(module, location):
        found = getattr(module, "__file__", None) or "a namespace package"
        raise PackLoadError(
            target,
            f"importing '{module.__name__}' found {found} instead of {location}; another module "
            f"of that name comes first on sys.path, so rename the package.",
        )
    _PATH_IMPORTS[module.__name__] = location
    return module


def _import_file(path: Path, *, target: str) -> ModuleType:
    """Import a ``.py`` file as a top-level module named after its stem."""
    name = path.stem
    if not name.isidentifier():
        raise PackLoadError(
            target, f"'{path.name}' is not an importable module name; rename the file."
        )
    _add_to_sys_path(path.parent)
    if _claim_name(name, path, target=target):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PackLoadError(target, f"'{path}' cannot be imported as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise PackLoadError(
            target, f"importing '{path}' failed: {_describe_exception(exc)}"
        ) from exc
    _PATH_IMPORTS[name] = path
    return module


def _import_package_dir(directory: Path, *, target: str) -> ModuleType:
    """Import the package rooted at ``directory`` (it holds ``__init__.py``)."""
    name = directory.name
    if not name.isidentifier():
        raise PackLoadError(
            target, f"directory '{name}' is not an importable package name; rename it."
        )
    _add_to_sys_path(directory.parent)
    _claim_name(name, directory, target=target)
    importlib.invalidate_caches()
    return _check_origin(_import_module(name, target=target), directory, target=target)


def _pyproject_entry_points(pyproject: Path, *, target: str) -> list[str]:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PackLoadError(target, f"cannot read {pyproject}: {exc}") from exc
    groups = data.get("project", {}).get("entry-points", {})
    declared = groups.get(PACKS_GROUP, {}) if isinstance(groups, dict) else {}
    return [str(v) for v in declared.values()] if isinstance(declared, dict) else []


def _candidate_modules(root: Path) -> list[Path]:
    """List the packages (directories with ``__init__.py``) and modules directly under ``root``."""
    found: list[Path] = []
    for child in sorted(root.iterdir()):
        if child.name.startswith((".", "_")) or child.name in _SKIPPED_DIRS:
            continue
        is_package = child.is_dir() and (child / "__init__.py").is_file()
        is_module = (
            child.is_file()
            and child.suffix == ".py"
            and child.name not in _SKIPPED_FILES
            and not child.name.startswith("test_")
        )
        if (is_package or is_module) and (child.stem if is_module else child.name).isidentifier():
            found.append(child)
    return found


def _load_directory(directory: Path, *, target: str) -> list[Pack]:
    if (directory / "__init__.py").is_file():
        return _packs_or_fail(_import_package_dir(directory, target=target), target=target)
    roots = [directory / "src", directory] if (directory / "src").is_dir() else [directory]
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file():
        values = _pyproject_entry_points(pyproject, target=target)
        if values:
            return [
                pack
                for value in values
                for pack in _load_project_entry_point(value, roots, target=target)
            ]
    packs: list[Pack] = []
    for root in roots:
        for candidate in _candidate_modules(root):
            if candidate.is_dir():
                module = _import_package_dir(candidate, target=target)
            else:
                module = _import_file(candidate, target=target)
            packs.extend(p for p in packs_in_module(module) if not any(p is q for q in packs))
        if packs:
            break
    if not packs:
        raise PackLoadError(
            target,
            f"no Pack found in '{directory}': it holds no package or module defining one at top "
            f"level. Declare an '{PACKS_GROUP}' entry point in pyproject.toml, or pass the "
            f"module or file that defines the pack.",
        )
    return packs


def _load_project_entry_point(value: str, roots: list[Path], *, target: str) -> list[Pack]:
    """Load a project's own ``sa.packs`` entry point (``module[:attr]``) from its source roots."""
    value = value.strip()
    top = value.partition(":")[0].split(".")[0]
    for root in reversed(roots):
        _add_to_sys_path(root)
    locations = [loc for root in roots for loc in (root / top, root / f"{top}.py") if loc.exists()]
    if locations:
        _claim_name(top, locations[0], target=target)
    importlib.invalidate_caches()
    packs = _load_module_target(value)
    if locations:
        _check_origin(sys.modules[top], locations[0], target=target)
    return packs


def _packs_or_fail(module: ModuleType, *, target: str) -> list[Pack]:
    packs = packs_in_module(module)
    if not packs:
        raise PackLoadError(
            target,
            f"'{module.__name__}' defines no Pack at top level; define one "
            f"(pack = Pack(name=...)) or pass 'module:attribute'.",
        )
    return packs


def load_packs_from(target: str) -> list[Pack]:
    """Load the packs a command-line ``TARGET`` names.

    ``TARGET`` is, in the order tried:

    * a path to a ``.py`` file: imported as a module named after the file (its directory goes on
      ``sys.path``), and every top-level ``Pack`` in it is returned;
    * a directory: a package (it holds ``__init__.py``) is imported from its parent directory; a
      project (``pyproject.toml``) loads its own ``sa.packs`` entry points, or else the packages
      and modules found in ``src/`` or at its root;
    * ``module:attribute``: that object, which must be a ``Pack``;
    * ``module``: every top-level ``Pack`` of the module (for a package without one, its ``pack``
      submodule).

    Args:
        target: the module name, file or directory.

    Returns:
        The packs, in definition order; never empty.

    Raises:
        PackLoadError: the target does not exist, fails to import or defines no pack.

    """
    path = Path(target).expanduser()
    if path.is_file() or target.endswith(".py"):
        if not path.is_file():
            raise PackLoadError(target, f"file '{path}' does not exist.")
        if path.suffix != ".py":
            raise PackLoadError(target, f"'{path}' is not a .py file.")
        return _packs_or_fail(_import_file(path.resolve(), target=target), target=target)
    if path.is_dir():
        return _load_directory(path.resolve(), target=target)
    if not _MODULE_TARGET.match(target):
        raise PackLoadError(
            target,
            "it is not an existing file or directory, nor a module name ('my_pack' or "
            "'my_pack:pack').",
        )
    return _load_module_target(target)


# ---------------------------------------------------------------------------------------------
# Installed packs
# ---------------------------------------------------------------------------------------------


def _entry_point_info(ep: EntryPoint) -> EntryPointInfo:
    dist = ep.dist
    if dist is None:
        return EntryPointInfo(name=ep.name, value=ep.value)
    location: str | None = None
    try:
        direct = dist.read_text("direct_url.json")
        if direct:
            url = str(json.loads(direct).get("url", ""))
            if url.startswith("file://"):
                location = url.removeprefix("file://")
        if location is None:
            location = str(dist.locate_file(""))
    except (OSError, ValueError, AttributeError, NotImplementedError):
        location = None
    return EntryPointInfo(
        name=ep.name,
        value=ep.value,
        distribution=dist.name,
        version=dist.version,
        location=location,
    )


def _fail(info: EntryPointInfo, reason: str, cause: BaseException | None = None) -> PackLoadError:
    error = PackLoadError(info.source, reason)
    error.__cause__ = cause
    return error


def installed_packs(
    *, validate: bool = True, known_tools: Iterable[str] = ()
) -> tuple[list[tuple[EntryPointInfo, Pack]], list[PackLoadError]]:
    """Load every pack installed under the ``sa.packs`` entry-point group.

    Each entry point must load a :class:`Pack` whose ``name`` equals the entry-point name (the
    package id). Entry points are processed in name order. Problems with one entry point are
    collected, never raised, so one broken distribution does not hide the others.

    Args:
        validate: also validate each pack's graph (other installed packs are the known packs
            for ``pack/agent`` references); invalid packs become errors whose ``__cause__`` is
            the :class:`~sa_core.errors.PackValidationError` listing every problem.
        known_tools: plugin tool names, for validation.

    Returns:
        ``(loaded, errors)``: ``(EntryPointInfo, Pack)`` pairs that loaded (and validated), and
        one :class:`~sa_core.errors.PackLoadError` per broken entry point, naming its
        distribution.

    """
    loaded: list[tuple[EntryPointInfo, Pack]] = []
    errors: list[PackLoadError] = []
    owners: dict[str, EntryPointInfo] = {}
    for ep in sorted(entry_points(group=PACKS_GROUP), key=lambda e: (e.name, e.value)):
        info = _entry_point_info(ep)
        try:
            value = ep.load()
        except Exception as exc:
            errors.append(_fail(info, f"import failed: {_describe_exception(exc)}", exc))
            continue
        if not isinstance(value, Pack):
            errors.append(
                _fail(
                    info,
                    f"it loads a {type(value).__name__}, not a Pack; point the entry point at a "
                    f"Pack object ('module:attribute').",
                )
            )
            continue
        if value.name != ep.name:
            errors.append(
                _fail(
                    info,
                    f"it loads pack '{value.name}', but the entry-point name is '{ep.name}'; a "
                    f"pack's name is its package id, so make them the same.",
                )
            )
            continue
        if value.name in owners:
            errors.append(
                _fail(
                    info,
                    f"pack '{value.name}' is already provided by {owners[value.name].source}; "
                    f"uninstall one of the two distributions.",
                )
            )
            continue
        owners[value.name] = info
        loaded.append((info, value))
    if not validate:
        return loaded, errors
    tools = list(known_tools)
    packs = [pack for _, pack in loaded]
    valid: list[tuple[EntryPointInfo, Pack]] = []
    for info, pack in loaded:
        try:
            pack.validate(known_tools=tools, known_packs=packs)
        except PackValidationError as exc:
            errors.append(_fail(info, str(exc), exc))
            continue
        valid.append((info, pack))
    return valid, errors
