"""``sa unpack``: write an installed pack (or a wheel) back into an editable project.

The project gets the pack's Python package as installed, a ``pyproject.toml`` with the same
name, version, author, license, requirements and ``sa.packs`` entry points, the README and the
LICENSE. A pack built by ``sa pack`` also keeps its identity (``_pack.json`` and the
``[tool.standard-agents]`` table), so ``sa pack <project> --agent <agent>`` releases the next
version under the same names.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.parser import Parser
from importlib import metadata
from pathlib import Path

from sa_core.packaging.codegen import ProjectMeta, render_pyproject
from sa_core.packaging.errors import PackagingError
from sa_core.packaging.identity import PackIdentity, read_identity
from sa_core.packaging.sources import metadata_name
from sa_hooks import PACKS_GROUP

__all__ = ["UnpackResult", "unpack_distribution"]

_TEST = '''"""Checks written by sa unpack; add your own tests here (see docs/testing.md)."""

from {module} import pack


def test_pack_is_valid() -> None:
    pack.validate()
'''


@dataclass
class UnpackResult:
    """What ``sa unpack`` wrote.

    Attributes:
        project: the project directory.
        distribution: the distribution name.
        version: its version.
        modules: the top-level packages copied.
        entry_points: the ``sa.packs`` entry points (name -> value).
        identity: the ``sa pack`` identity, when the distribution has one.

    """

    project: Path
    distribution: str
    version: str
    modules: list[str]
    entry_points: dict[str, str]
    identity: PackIdentity | None = None
    files: list[str] = field(default_factory=list)


@contextmanager
def _search_path(target: str, path: Sequence[str] | None) -> Iterator[list[str] | None]:
    """Yield the search path: a wheel is opened into a temporary directory first."""
    candidate = Path(target)
    if candidate.suffix == ".whl" and candidate.is_file():
        with tempfile.TemporaryDirectory(prefix="sa-unpack-") as tmp:
            with zipfile.ZipFile(candidate) as archive:
                archive.extractall(tmp)
            yield [tmp]
    else:
        yield list(path) if path is not None else None


def _find(target: str, path: list[str] | None) -> metadata.Distribution:
    wanted = metadata_name(Path(target).name.split("-")[0]) if target.endswith(".whl") else None
    found: list[metadata.Distribution] = []
    dists = metadata.distributions(path=path) if path is not None else metadata.distributions()
    for dist in dists:
        name = dist.metadata["Name"] or ""
        eps = [ep.name for ep in dist.entry_points if ep.group == PACKS_GROUP]
        if metadata_name(name) in (metadata_name(target), wanted) or target in eps:
            found.append(dist)
    if not found:
        raise PackagingError(
            f"no installed distribution or pack named '{target}'; 'sa packs' lists the installed "
            f"packs (or pass a .whl file)."
        )
    return found[0]


def _editable_location(dist: metadata.Distribution) -> str | None:
    import json

    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    if direct.get("dir_info", {}).get("editable"):
        return str(direct.get("url", "")).removeprefix("file://")
    return None


def _copy_modules(dist: metadata.Distribution, modules: list[str], out: Path) -> list[str]:
    copied: list[str] = []
    for file in dist.files or []:
        parts = file.parts
        if not parts or parts[0] not in modules or "__pycache__" in parts:
            continue
        if file.suffix in (".pyc", ".pyo"):
            continue
        source = Path(str(dist.locate_file(file)))
        if source.is_file():
            destination = out.joinpath(*parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
            copied.append("/".join(parts))
    return copied


def _license(dist: metadata.Distribution) -> str | None:
    for file in dist.files or []:
        if ".dist-info" in file.parts[0] and file.name.upper().startswith(("LICENSE", "COPYING")):
            return dist.read_text("/".join(file.parts[1:]))
    return None


def unpack_distribution(
    target: str,
    out: Path | None = None,
    *,
    path: Sequence[str] | None = None,
    force: bool = False,
) -> UnpackResult:
    """Write an installed pack's distribution back into an editable project.

    Args:
        target: a distribution name, a pack id (entry-point name) or a ``.whl`` file.
        out: the project directory; by default ``./<distribution>``.
        path: where to look for installed distributions (default: ``sys.path``).
        force: write into a non-empty ``out``.

    Raises:
        PackagingError: the pack is not found, is an editable install, or ``out`` is not empty.

    """
    with _search_path(target, path) as search:
        dist = _find(target, search)
        name = dist.metadata["Name"] or target
        version = dist.version
        editable = _editable_location(dist)
        if editable is not None:
            raise PackagingError(
                f"{name} is installed in editable mode from {editable}; edit the project there."
            )
        entry_points = {ep.name: ep.value for ep in dist.entry_points if ep.group == PACKS_GROUP}
        if not entry_points:
            raise PackagingError(f"{name} declares no '{PACKS_GROUP}' entry point: not a pack.")
        modules = sorted({value.partition(":")[0].split(".")[0] for value in entry_points.values()})
        out = (out or Path.cwd() / name).resolve()
        if out.exists() and any(out.iterdir()) and not force:
            raise PackagingError(f"{out} is not empty; choose another --out or pass --force.")
        out.mkdir(parents=True, exist_ok=True)
        files = _copy_modules(dist, modules, out)
        if not files:
            raise PackagingError(f"{name} lists no files of {', '.join(modules)} to unpack.")
        raw = Parser().parsestr(dist.read_text("METADATA") or "")
        license_body = _license(dist)
    identity = read_identity(out / modules[0]) if len(modules) == 1 else None
    meta = ProjectMeta(
        distribution=name,
        version=version,
        module=modules[0],
        description=raw.get("Summary") or "",
        entry_points=entry_points,
        dependencies=[r for r in raw.get_all("Requires-Dist") or [] if "extra ==" not in r],
        author=raw.get("Author-email") or raw.get("Author"),
        license_expression=raw.get("License-Expression"),
        license_file=license_body is not None,
        requires_python=raw.get("Requires-Python") or ">=3.11",
        identity=identity,
        extra_modules=modules[1:],
    )
    (out / "pyproject.toml").write_text(render_pyproject(meta), encoding="utf-8")
    body = raw.get_payload()
    (out / "README.md").write_text(str(body or f"# {name}\n"), encoding="utf-8")
    if license_body is not None:
        (out / "LICENSE").write_text(license_body, encoding="utf-8")
    tests = out / "tests"
    if not tests.exists():
        tests.mkdir()
        (tests / f"test_{modules[0]}.py").write_text(
            _TEST.format(module=modules[0]), encoding="utf-8"
        )
    return UnpackResult(
        project=out,
        distribution=name,
        version=version,
        modules=modules,
        entry_points=entry_points,
        identity=identity,
        files=files,
    )
