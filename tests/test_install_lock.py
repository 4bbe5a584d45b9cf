"""Reproducible installs: `make setup` installs the pins; `make test` runs as users run."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    found = {}
    for line in lines:
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name), line
            found[canonicalize_name(name)] = version
    return found


def project(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def make(*args: str) -> str:
    command = ["make", "--no-print-directory", "-C", str(ROOT), *args]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    return result.stdout


def test_constraints_pin_every_dependency_within_the_ranges_of_pyproject() -> None:
    pinned = pins()
    meta = project(ROOT)
    for line in [*meta["dependencies"], *meta["optional-dependencies"]["test"]]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not pinned in constraints.txt; run make lock"
        assert requirement.specifier.contains(Version(pinned[name]), prereleases=True), line
        assert "==" not in line, f"pyproject.toml keeps ranges for users: {line}"


def test_constraints_pin_released_versions_and_none_of_this_repositorys_packages() -> None:
    pinned = pins()
    ours = [ROOT, *sorted(ROOT.glob("packs/*/")), *sorted(ROOT.glob("plugins/*/"))]
    for path in ours:
        if (path / "pyproject.toml").is_file():
            assert canonicalize_name(project(path)["name"]) not in pinned, path
    assert not [v for v in pinned.values() if "+" in v], "a local version is not on PyPI"
    assert "pip" not in pinned


def test_make_setup_installs_the_pins_and_a_new_lock_reinstalls(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    commands = make("-n", "setup", f"VENV={venv}", "PYTHON=false")
    assert re.search(r"pip install .*-c constraints\.txt .*-e \"\.\[test\]\"", commands)
    database = make("-p", "-n", "setup", f"VENV={venv}", "PYTHON=false")
    rule = next(line for line in database.splitlines() if line.startswith(f"{venv}/.installed:"))
    assert "constraints.txt" in rule.split(":", 1)[1].split()


def test_make_test_runs_pytest_writing_bytecode(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    commands = make("-n", "test", f"VENV={venv}", "PYTHON=false").splitlines()
    run = next(line for line in commands if "-m pytest" in line)
    assert run.startswith("env -u PYTHONDONTWRITEBYTECODE ")
    assert run.endswith("-m pytest tests packs plugins")
