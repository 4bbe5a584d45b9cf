"""Docs that are generated or referenced stay in step with the code."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sa_core.cli import COMMAND_MODULES, main

ROOT = Path(__file__).resolve().parents[1]


def test_hooks_reference_is_generated_from_the_specs():
    spec = importlib.util.spec_from_file_location("gen_hooks", ROOT / "docs" / "gen_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "hooks.md").read_text() == module.render(), "run python docs/gen_hooks.py"


def test_readme_links_point_to_existing_files():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target


# -- the examples in the docs run as written ---------------------------------------------------


def fenced(document: str, language: str) -> list[str]:
    """The fenced code blocks of one language in a doc, in order."""
    text = (ROOT / document).read_text()
    blocks = re.findall(rf"^ *```{language}\n(.*?)^ *```", text, flags=re.S | re.M)
    return [textwrap.dedent(block) for block in blocks]


def run_python(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )


def test_readme_first_agent_runs_and_loads_with_sa_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "demo.py").write_text(fenced("README.md", "python")[0])
    result = run_python(["demo.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "user Weather in Oslo?",
        "assistant None",
        "tool Sunny in Oslo",
        "assistant It is sunny in Oslo.",
    ]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    code = main(["run", "helper", "--pack", "demo.py", "--test-provider"])
    assert code == 0
    assert "agent> Test response received." in capsys.readouterr().out


def test_readme_lists_every_sa_command():
    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"^\| `sa (\w+)", readme, flags=re.M))
    listed |= set(re.findall(r"/ `sa (\w+)", readme))
    assert listed == set(COMMAND_MODULES)


@pytest.fixture
def kitchen_units(tmp_path: Path) -> Path:
    """The tutorial's project, written from the tutorial's own blocks."""
    project = tmp_path / "kitchen-units"
    (project / "kitchen_units").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(fenced("docs/tutorial.md", "toml")[0])
    definitions, tests = fenced("docs/tutorial.md", "python")
    (project / "kitchen_units" / "__init__.py").write_text(definitions)
    (project / "tests" / "test_kitchen_units.py").write_text(tests)
    return project


def test_tutorial_project_validates_passes_its_tests_and_runs(
    kitchen_units: Path, monkeypatch, capsys
):
    consoles = fenced("docs/tutorial.md", "console")
    expected = consoles[0].splitlines()[1]
    assert main(["validate", str(kitchen_units)]) == 0
    assert capsys.readouterr().out.strip() == expected

    tests = run_python(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(kitchen_units)],
        kitchen_units.parent,
        PYTHONPATH=str(kitchen_units),
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout and "3 passed" in consoles[1]

    monkeypatch.chdir(kitchen_units.parent)
    monkeypatch.setattr("sys.stdin", io.StringIO("How many grams is a pound?\n"))
    assert main(["run", "kitchen_helper", "--pack", "kitchen-units", "--test-provider"]) == 0
    assert "agent> Test response received." in capsys.readouterr().out


def test_testing_guide_examples_pass(tmp_path: Path):
    blocks = fenced("docs/testing.md", "python")
    first, fixture = blocks[0], next(b for b in blocks if "sa_runtime_factory" in b)
    module = first + "\n\n" + fixture
    (tmp_path / "test_guide.py").write_text(module)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nasyncio_mode = "strict"\n'
        'asyncio_default_fixture_loop_scope = "function"\nfilterwarnings = ["error"]\n'
    )
    result = run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_structured_output_example_runs():
    import asyncio

    namespace: dict[str, object] = {}
    exec(compile(fenced("docs/structured-output.md", "python")[0], "structured-output.md", "exec"),
         namespace)
    asyncio.run(namespace["main"]())  # type: ignore[operator]
