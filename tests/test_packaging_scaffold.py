"""`sa new pack NAME`: the scaffold validates, and its own generated tests pass."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from sa_core.cli import main
from sa_core.packaging import PackagingError, scaffold_pack


def test_scaffold_writes_a_project_whose_own_tests_pass(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "new",
            "pack",
            "tide-desk",
            "--dir",
            str(tmp_path),
            "--author",
            "Ada Lovelace <ada@example.com>",
            "--license",
            "MIT",
            "--description",
            'Answers questions about "tides".',
        ]
    )
    assert code == 0 and "Created" in capsys.readouterr().out
    project = tmp_path / "tide-desk"
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == [
        ".gitignore",
        "LICENSE",
        "README.md",
        "pyproject.toml",
        "tests/test_tide_desk.py",
        "tide_desk/__init__.py",
    ]
    data = tomllib.loads((project / "pyproject.toml").read_text())
    assert data["project"]["name"] == "tide-desk" and data["project"]["license"] == "MIT"
    assert data["project"]["description"] == 'Answers questions about "tides".'
    assert data["project"]["entry-points"]["sa.packs"] == {"tide_desk": "tide_desk:pack"}
    assert "Ada Lovelace" in (project / "LICENSE").read_text()

    assert main(["validate", str(project)]) == 0
    assert "pack tide_desk: 1 agent, 1 prompt, 1 model, 1 tool" in capsys.readouterr().out

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(project)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_scaffold_refuses_bad_names_and_existing_projects(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match="not a valid distribution name") as bad:
        scaffold_pack("-bad name-", tmp_path)
    assert "package_name" not in str(bad.value)  # no agent is involved yet
    (tmp_path / "taken" / "x").mkdir(parents=True)
    with pytest.raises(PackagingError, match="already exists"):
        scaffold_pack("taken", tmp_path)
    with pytest.raises(PackagingError, match="not a valid SPDX"):
        scaffold_pack("fine", tmp_path, license_id="whatever I like")
