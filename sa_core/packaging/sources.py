"""Where a pack's code lives, and how it is copied into the packed distribution.

Definitions that hold code (tool and hook functions, argument models, endpoint handlers) cannot
be written out as data, so ``sa pack`` copies the source they come from. The *units* copied are
top-level modules or packages: the one that defines the pack, the ones that define the
closure's functions and classes, and every module of the same project they import. Each unit is
copied whole to ``<module>/_vendor/<name>`` and its absolute imports of other units are
rewritten to the new home. Installed third-party modules are not copied: their distributions
become requirements.

Packing a package that ``sa pack`` wrote (an unpacked or installed pack, recognised by its
``_pack.json``) copies that package as it is, except for the files ``sa pack`` writes anew.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from fnmatch import fnmatch
from importlib import metadata, util
from pathlib import Path
from types import ModuleType
from typing import Any

from sa_core.packaging.errors import PackagingError
from sa_core.packaging.identity import IDENTITY_FILE
from sa_core.packaging.imports import imported_top_levels, rewrite_imports
from sa_core.spec import Pack

__all__ = ["GENERATED_FILES", "Ref", "SourcePlan", "Unit"]

GENERATED_FILES = frozenset({"__init__.py", "definitions.py", IDENTITY_FILE})
"""Files of a packed package that ``sa pack`` writes; they are never copied."""

_CORE = frozenset({"sa_core", "sa_hooks", "sa_providers", "__future__", "builtins"})
_SKIPPED = ("__pycache__", "*.pyc", "*.pyo", "*.egg-info", ".DS_Store")
_CORE_DISTRIBUTION = "standard-agents"


@dataclass(frozen=True)
class Unit:
    """A top-level module or package copied into the distribution.

    Attributes:
        source: its import name here.
        path: the package directory or the module file.
        target: its import name in the packed distribution.

    """

    source: str
    path: Path
    target: str


@dataclass(frozen=True)
class Ref:
    """An object the generated code reaches as ``module.attribute``.

    ``pick`` names the definition to pick out of a list (``_pick(module.attribute, pick)``).
    """

    module: str
    attribute: str
    pick: str | None = None


def _resolve(module: ModuleType, dotted: str) -> Any:
    value: Any = module
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _location(top: str) -> Path | None:
    """Return the package directory or module file of a top-level module (not imported)."""
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None) if module is not None else None
    if file is None:
        try:
            spec = util.find_spec(top)
        except (ImportError, ValueError):
            return None
        file = spec.origin if spec is not None and spec.has_location else None
    if file is None:
        return None
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path


def _installed(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)


def find_pack_module(pack: Pack) -> ModuleType:
    """Return the module that holds ``pack`` as a top-level name.

    Raises:
        PackagingError: no imported module does.

    """

    def unlikely(name: str) -> bool:
        leaf = name.rpartition(".")[2]
        return leaf.startswith("test") or leaf == "conftest"

    for name in sorted(sys.modules, key=lambda n: (unlikely(n), n)):
        module = sys.modules.get(name)
        if module is None or name == "__main__" or not hasattr(module, "__dict__"):
            continue
        if any(value is pack for value in list(vars(module).values())):
            return module
    raise PackagingError(
        f"pack '{pack.name}' is not a top-level name of any module, so its code cannot be "
        f"copied; define it at module level (pack = Pack(...)) and pass that module to sa pack."
    )


class SourcePlan:
    """The units to copy and the requirements to declare for one packed distribution.

    Args:
        pack: the source pack.
        module: the packed distribution's top-level package.
        objects: functions and classes the generated code must reach.

    """

    def __init__(self, pack: Pack, module: str, objects: list[Any]) -> None:
        self.module = module
        self.units: dict[str, Unit] = {}
        self.requirements: set[str] = set()
        self.generated: Path | None = None
        self.generated_name: str | None = None
        pack_module = find_pack_module(pack)
        self.pack_module = pack_module.__name__
        top = self.pack_module.split(".")[0]
        location = _location(top)
        if location is None:
            raise PackagingError(f"module '{top}' has no file on disk, so it cannot be copied.")
        self.root: Path | None = None if _installed(location) else location.parent
        if location.is_dir() and (location / IDENTITY_FILE).is_file():
            self.generated, self.generated_name = location, top
        else:
            self.units[top] = Unit(top, location, f"{module}._vendor.{top}")
        self._distributions = metadata.packages_distributions()
        for obj in objects:
            name = getattr(obj, "__module__", None)
            if isinstance(name, str):
                self._classify(name.split(".")[0])
        self._follow_imports()

    # -- classification -----------------------------------------------------------------------

    def _classify(self, top: str) -> None:
        if top in self.units or top == self.generated_name or top == "__main__":
            return
        if top in sys.stdlib_module_names or top in _CORE:
            return
        location = _location(top)
        if location is None:
            return
        if (
            self.root is not None
            and location.is_relative_to(self.root)
            and not _installed(location)
        ):
            self.units[top] = Unit(top, location, f"{self.module}._vendor.{top}")
            return
        for dist in self._distributions.get(top, []):
            if metadata_name(dist) != _CORE_DISTRIBUTION:
                self.requirements.add(metadata_name(dist))

    def _follow_imports(self) -> None:
        done: set[Path] = set()
        while True:
            files = [f for f in self._python_files() if f not in done]
            if not files:
                return
            for file in files:
                done.add(file)
                for top in imported_top_levels(file.read_text(encoding="utf-8", errors="replace")):
                    self._classify(top)

    def _python_files(self) -> list[Path]:
        roots = [u.path for u in self.units.values()]
        if self.generated is not None:
            roots.append(self.generated)
        files: list[Path] = []
        for root in roots:
            files.extend([root] if root.is_file() else sorted(root.rglob("*.py")))
        return [f for f in files if "__pycache__" not in f.parts]

    # -- references ---------------------------------------------------------------------------

    def target_module(self, name: str) -> str | None:
        """Where module ``name`` is imported from in the packed distribution.

        ``None`` for modules the generated code cannot import: ``__main__`` and the files
        ``sa pack`` writes anew.
        """
        top, _, rest = name.partition(".")
        suffix = f".{rest}" if rest else ""
        if top == self.generated_name:
            return None if rest in ("", "definitions") else self.module + suffix
        if top in self.units:
            return self.units[top].target + suffix
        return None if top == "__main__" else name

    def copied(self, name: str) -> bool:
        """Whether module ``name`` is copied into the distribution."""
        top = name.partition(".")[0]
        return top in self.units or top == self.generated_name

    def ref(self, obj: Any) -> Ref | None:
        """Return a reference to a module-level function or class, else ``None``."""
        name = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if not isinstance(name, str) or not isinstance(qualname, str) or "<" in qualname:
            return None
        module = sys.modules.get(name)
        if module is None or _resolve(module, qualname) is not obj:
            return None
        target = self.target_module(name)
        return None if target is None else Ref(target, qualname)

    def locate(self, kind: str, definition: Any, key: str) -> Ref | None:
        """Return a reference to a definition object held by a copied module.

        Prefers a module-level name holding the definition itself, then a module-level list
        holding it, then a module-level ``Pack`` holding it.
        """
        candidates: list[tuple[int, str, Ref]] = []
        for name in sorted(sys.modules):
            module = sys.modules.get(name)
            target = self.target_module(name)
            if module is None or target is None or not self.copied(name):
                continue
            for attribute, value in list(vars(module).items()):
                if value is definition:
                    candidates.append((0, name, Ref(target, attribute)))
                elif isinstance(value, list | tuple) and any(v is definition for v in value):
                    candidates.append((1, name, Ref(target, attribute, key)))
                elif isinstance(value, Pack) and any(v is definition for v in getattr(value, kind)):
                    candidates.append((2, name, Ref(target, f"{attribute}.{kind}", key)))
        return min(candidates, key=lambda c: (c[0], c[1]))[2] if candidates else None

    # -- copying ------------------------------------------------------------------------------

    def mapping(self) -> dict[str, str]:
        """Old top-level import name -> new import name, for rewriting imports."""
        found = {u.source: u.target for u in self.units.values()}
        if self.generated_name is not None and self.generated_name != self.module:
            found[self.generated_name] = self.module
        return found

    def copy_into(self, package_dir: Path) -> list[str]:
        """Copy the units under ``package_dir`` (the packed top-level package); list what went.

        Returns:
            One line per unit, for the report.

        """
        mapping = self.mapping()
        report: list[str] = []
        if self.generated is not None:
            _copy_tree(self.generated, package_dir, mapping, skip_top=GENERATED_FILES)
            report.append(f"{self.generated_name} (the packed package, as it is)")
        vendor = package_dir / "_vendor"
        if self.units:
            vendor.mkdir(parents=True, exist_ok=True)
            init = vendor / "__init__.py"
            if not init.exists():
                init.write_text('"""Source modules copied in by sa pack."""\n', encoding="utf-8")
        for unit in sorted(self.units.values(), key=lambda u: u.source):
            destination = vendor / unit.path.name
            if unit.path.is_dir():
                _copy_tree(unit.path, destination, mapping)
                report.append(f"{unit.source} (package {unit.path})")
            else:
                _copy_file(unit.path, destination, mapping)
                report.append(f"{unit.source} (module {unit.path})")
        return report


def metadata_name(distribution: str) -> str:
    """Return a distribution name in its normalised form (PEP 503)."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(distribution))


def _copy_file(source: Path, destination: Path, mapping: dict[str, str]) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.suffix == ".py":
        text = source.read_text(encoding="utf-8")
        destination.write_text(rewrite_imports(text, mapping), encoding="utf-8")
    else:
        shutil.copy2(source, destination)


def _copy_tree(
    source: Path, destination: Path, mapping: dict[str, str], skip_top: frozenset[str] = frozenset()
) -> None:
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if any(fnmatch(part, pattern) for part in relative.parts for pattern in _SKIPPED):
            continue
        if len(relative.parts) == 1 and relative.name in skip_top:
            continue
        if path.is_file():
            _copy_file(path, destination / relative, mapping)
