"""`sa pack` never ships bytecode caches or build leftovers, whatever the source holds.

A source that has been imported carries ``__pycache__`` folders; a project someone ran or built
carries them and ``*.egg-info``. setuptools takes such a folder for a package it was not told
about (and warns, an error under ``-W error``), and would ship the ``.pyc`` files as data.
"""

from __future__ import annotations

import compileall
import tarfile
import textwrap
import zipfile
from pathlib import Path

from sa_core.packaging import pack_agent
from sa_core.packaging.builder import build_distributions

SOURCE = """
from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

from .helpers import greet

hello = define_tool(name="hello", description="Say hello.", execute=greet)

pack = Pack(
    name="cached_desk",
    agents=[define_agent(name="greeter", side_a={"prompt": "main"}, license="MIT")],
    prompts=[define_prompt(name="main", model="m", prompt="Greet.", tools=["hello"])],
    models=[define_model(name="m", provider="test", model="m")],
    tools=[hello],
)
"""


def write_source_with_caches(root: Path) -> Path:
    """A pack package that was imported and built before: caches and leftovers inside."""
    package = root / "cached_desk"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(SOURCE), encoding="utf-8")
    (package / "helpers.py").write_text(
        "def greet(state, args):\n    return 'hello'\n", encoding="utf-8"
    )
    (package / "templates" / "card.txt").write_text("Hello, {name}!\n", encoding="utf-8")
    assert compileall.compile_dir(package, quiet=1)
    (package / "templates" / "__pycache__").mkdir()
    (package / "templates" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"\0")
    (package / "cached_desk.egg-info").mkdir()
    (package / "cached_desk.egg-info" / "PKG-INFO").write_text("Name: x\n", encoding="utf-8")
    assert list(package.rglob("__pycache__/*.pyc"))
    return package


def members(sdist: Path, wheel: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    with zipfile.ZipFile(wheel) as archive:
        return names + archive.namelist()


def test_packing_a_source_with_pycache_builds_a_wheel_without_caches(tmp_path: Path) -> None:
    package = write_source_with_caches(tmp_path / "src")
    result = pack_agent(str(package), "greeter", out=tmp_path / "out")
    sdist, wheel = sorted(result.files, key=lambda f: f.suffix)
    names = members(sdist, wheel)
    assert "sa_pack_greeter/_vendor/cached_desk/templates/card.txt" in names
    assert "sa_pack_greeter/_vendor/cached_desk/helpers.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if "cached_desk.egg-info" in n]
    assert not list(result.project.rglob("__pycache__")), "packing left caches in the project"


def test_a_packed_project_that_was_run_still_builds_without_caches(tmp_path: Path) -> None:
    """The generated pyproject itself keeps caches out: the user builds it after running it."""
    package = write_source_with_caches(tmp_path / "src")
    project = pack_agent(str(package), "greeter", out=tmp_path / "out", build=False).project
    assert compileall.compile_dir(project / "sa_pack_greeter", quiet=1)
    (project / "sa_pack_greeter.egg-info").mkdir()
    sdist, wheel = build_distributions(project, tmp_path / "dist")
    names = members(sdist, wheel)
    assert "sa_pack_greeter/definitions.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
