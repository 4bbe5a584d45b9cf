"""Build distributions with ``build``, check them and upload them with ``twine``.

The build runs without an isolated environment when this environment already has the build
requirements (``setuptools>=77``), so packing works offline; otherwise ``build`` creates an
isolated environment, which needs the package index. The wheel is built from the sdist, as
``python -m build`` does, which proves the sdist is complete.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from sa_core.packaging.errors import PackagingError

__all__ = ["build_distributions", "distribution_files", "twine_check", "twine_upload"]


def backend_output(exc: BaseException) -> str:
    inner = getattr(exc, "exception", None)
    output = getattr(inner, "output", None) or getattr(exc, "output", None)
    if isinstance(output, bytes):
        output = output.decode("utf-8", "replace")
    return f"{exc}\n{output or ''}".strip()


def build_one(
    project: Path, distribution: Literal["sdist", "wheel"], outdir: Path, isolated: bool | None
) -> Path:
    import build
    import build.env
    from pyproject_hooks import quiet_subprocess_runner

    builder = build.ProjectBuilder(project, runner=quiet_subprocess_runner)
    if isolated is None:
        # The backend's own hook runs only once [build-system] requires are met here: an older
        # setuptools would reject the PEP 639 metadata instead of reporting what it lacks.
        isolated = any(
            next(iter(build.check_dependency(req)), None) is not None
            for req in builder.build_system_requires
        ) or bool(builder.check_dependencies(distribution))
    if not isolated:
        return Path(builder.build(distribution, outdir))
    with build.env.DefaultIsolatedEnv() as env:
        builder = build.ProjectBuilder.from_isolated_env(
            env, project, runner=quiet_subprocess_runner
        )
        env.install(builder.build_system_requires)
        env.install(builder.get_requires_for_build(distribution))
        return Path(builder.build(distribution, outdir))


def build_distributions(
    project: Path, outdir: Path, *, isolated: bool | None = None
) -> tuple[Path, Path]:
    """Build the sdist, then the wheel from the sdist.

    Args:
        project: the directory holding ``pyproject.toml``.
        outdir: where the files go (created if needed).
        isolated: build in an isolated environment; by default only when this environment
            lacks the build requirements.

    Returns:
        ``(sdist, wheel)`` paths.

    Raises:
        PackagingError: the build failed; the message holds the backend's output.

    """
    import build

    outdir.mkdir(parents=True, exist_ok=True)
    try:
        sdist = build_one(project, "sdist", outdir, isolated)
        with tempfile.TemporaryDirectory(prefix="sa-pack-sdist-") as tmp:
            with tarfile.open(sdist) as archive:
                if hasattr(tarfile, "data_filter"):  # Python 3.11.4+
                    archive.extractall(tmp, filter="data")
                else:  # pragma: no cover - our own sdist, written a moment ago
                    archive.extractall(tmp)
            root = next(p for p in Path(tmp).iterdir() if p.is_dir())
            wheel = build_one(root, "wheel", outdir, isolated)
    except (build.BuildException, build.BuildBackendException) as exc:
        raise PackagingError(f"building {project} failed: {backend_output(exc)}") from exc
    return sdist, wheel


def distribution_files(directory: Path) -> list[Path]:
    """Return the wheels and sdists in ``directory`` (or in its ``dist/``), sorted by name.

    Raises:
        PackagingError: there are none.

    """
    for candidate in (directory, directory / "dist"):
        if candidate.is_dir():
            files = sorted([*candidate.glob("*.whl"), *candidate.glob("*.tar.gz")])
            if files:
                return files
    raise PackagingError(
        f"no wheel or sdist in {directory} (nor in {directory / 'dist'}); build them with "
        f"'sa pack SOURCE --agent NAME' first."
    )


def twine_check(files: Sequence[Path]) -> str:
    """Run ``twine check --strict`` on the files and return its report.

    Raises:
        PackagingError: a file fails the check.

    """
    command = [sys.executable, "-m", "twine", "--no-color", "check", "--strict", *map(str, files)]
    env = {**os.environ, "COLUMNS": "1000"}  # one line per file, not wrapped at 80 columns
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    report = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        raise PackagingError(f"twine check failed:\n{report}")
    return report


def twine_upload(
    files: Sequence[Path],
    *,
    repository_url: str | None = None,
    repository: str | None = None,
    skip_existing: bool = False,
    interactive: bool | None = None,
) -> int:
    """Upload with ``twine upload``, its progress shown on this terminal.

    Credentials come from twine's usual sources: ``TWINE_USERNAME`` / ``TWINE_PASSWORD``,
    ``~/.pypirc`` and keyring. Without a terminal, twine never prompts for them.

    Returns:
        twine's exit code.

    """
    command = [sys.executable, "-m", "twine", "upload"]
    if not sys.stdout.isatty():  # logs and CI: no colour codes
        command.insert(3, "--no-color")
    if repository_url:
        command += ["--repository-url", repository_url]
    if repository:
        command += ["--repository", repository]
    if skip_existing:
        command.append("--skip-existing")
    if not (sys.stdin.isatty() if interactive is None else interactive):
        command.append("--non-interactive")
    command += [str(f) for f in files]
    return subprocess.run(command, check=False).returncode
