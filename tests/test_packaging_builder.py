"""Building packed projects: when the build needs an isolated environment."""

from __future__ import annotations

import io
from pathlib import Path

import build
import build.env
import pytest

from sa_core.packaging import builder

PYPROJECT = """\
[build-system]
requires = ["setuptools>=99999"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1.0"
license = "MIT"
"""


class _Isolated(Exception):
    """Raised by the stand-in isolated environment: the isolated path was taken."""


def test_unmet_build_requirements_pick_an_isolated_build_without_asking_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An installed setuptools older than the project needs rejects its PEP 639 metadata in
    # its own hooks, so the backend must not be asked what it needs.
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")

    def backend_asked(*args: object, **kwargs: object) -> set[str]:
        raise AssertionError("the installed backend was asked for its requirements")

    class Env:
        def __enter__(self) -> None:
            raise _Isolated

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(build.ProjectBuilder, "check_dependencies", backend_asked)
    monkeypatch.setattr(build.env, "DefaultIsolatedEnv", Env)
    with pytest.raises(_Isolated):
        builder.build_one(tmp_path, "sdist", tmp_path / "dist", None)


def test_twine_check_reports_one_line_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, str] = {}

    class Done:
        returncode = 0
        stdout = "Checking x: PASSED\n"
        stderr = ""

    def run(command: list[str], **kwargs: object) -> Done:
        env = kwargs["env"]
        assert isinstance(env, dict)
        seen.update(env)
        return Done()

    monkeypatch.setattr(builder.subprocess, "run", run)
    assert builder.twine_check([tmp_path / "x.whl"]) == "Checking x: PASSED"
    assert seen["COLUMNS"] == "1000"


def test_twine_upload_without_a_terminal_neither_prompts_nor_colours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []

    class Done:
        returncode = 0

    def run(command: list[str], **kwargs: object) -> Done:
        commands.append(command)
        return Done()

    monkeypatch.setattr(builder.subprocess, "run", run)
    monkeypatch.setattr(builder.sys, "stdout", io.StringIO())  # not a terminal
    url = "http://127.0.0.1:1/"
    assert builder.twine_upload([tmp_path / "x.whl"], repository_url=url, interactive=False) == 0
    assert commands[0][2:] == [
        "twine",
        "--no-color",
        "upload",
        "--repository-url",
        "http://127.0.0.1:1/",
        "--non-interactive",
        str(tmp_path / "x.whl"),
    ]
