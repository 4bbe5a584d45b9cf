"""The framework's own wheel, to install packed agents where standard-agents is not indexed.

A packed agent requires ``standard-agents>=<version>``. Until the framework is published on the
index a user installs from, ``sa pack --with-framework`` writes the framework's wheel into the
project's ``wheels/`` directory (never ``dist/``, so ``sa publish`` does not upload it), and the
pack installs with::

    pip install --find-links packed/<name>/wheels packed/<name>/dist/<pack>.whl

The wheel is built from the source tree the running framework was installed from (an editable
or path install); it is built from a temporary copy, so the source tree stays untouched.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from sa_core.packaging.errors import PackagingError

FRAMEWORK = "standard-agents"
_TOP_LEVEL = ("sa_hooks", "sa_core", "sa_providers")
_PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE")


def _is_framework_tree(path: Path) -> bool:
    pyproject = path / "pyproject.toml"
    if not pyproject.is_file() or not (path / "sa_core").is_dir():
        return False
    import tomllib

    try:
        name = tomllib.loads(pyproject.read_text()).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return bool(name == FRAMEWORK)


def framework_source() -> Path:
    """The source tree the running framework comes from.

    Returns:
        The directory holding standard-agents' ``pyproject.toml``.

    Raises:
        PackagingError: the framework was installed from a wheel, so there is no source tree
            to build one from; the message says what to do instead.
    """
    candidates: list[Path] = []
    try:
        direct = metadata.distribution(FRAMEWORK).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        direct = None
    if direct:
        url = urlparse(json.loads(direct).get("url", ""))
        if url.scheme == "file":
            candidates.append(Path(unquote(url.path)))
    import sa_core

    candidates.append(Path(sa_core.__file__).resolve().parents[1])
    for candidate in candidates:
        if _is_framework_tree(candidate):
            return candidate
    raise PackagingError(
        f"{FRAMEWORK} is installed from a wheel here, not from a source tree, so sa pack cannot "
        f"build its wheel. Install the pack next to the same {FRAMEWORK} wheel or source "
        f"checkout you installed from: pip install <pack wheel> <{FRAMEWORK} wheel or path>."
    )


def build_framework_wheel(outdir: Path, *, isolated: bool | None = None) -> Path:
    """Build the framework's wheel into ``outdir`` from a copy of its source tree.

    Args:
        outdir: where the wheel goes (created if needed); older framework wheels there are
            replaced.
        isolated: build in an isolated environment; by default only when this environment
            lacks the build requirements.

    Returns:
        The wheel's path.

    Raises:
        PackagingError: no source tree, or the build failed.
    """
    from sa_core.packaging.builder import backend_output, build_one

    source = framework_source()
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("standard_agents-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="sa-framework-") as tmp:
        copy = Path(tmp) / "src"
        copy.mkdir()
        for name in _PROJECT_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, copy / name)
        for package in _TOP_LEVEL:
            shutil.copytree(
                source / package,
                copy / package,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        try:
            return build_one(copy, "wheel", outdir, isolated)
        except Exception as exc:
            raise PackagingError(
                f"Building the {FRAMEWORK} wheel from {source} failed: {backend_output(exc)}"
            ) from exc
