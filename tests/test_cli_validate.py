"""``sa validate`` and the pack loader (sa_core.packloader)."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import sa_core.packloader as packloader
from sa_core.cli import main
from sa_core.errors import PackLoadError, PackValidationError
from sa_core.packloader import EntryPointInfo, installed_packs, load_packs_from

GOOD = """
from sa_core.spec import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="{name}",
    agents=[
        define_agent(
            name="helper",
            side_a={{"prompt": "main"}},
            expose_as_tool=True,
            tool_description="Helps.",
        )
    ],
    prompts=[define_prompt(name="main", model="fast", prompt="Help.")],
    models=[define_model(name="fast", provider="test", model="t")],
)
"""

BAD = """
from sa_core.spec import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="{name}",
    agents=[define_agent(name="helper", side_a={{"prompt": "mian"}})],
    prompts=[define_prompt(name="main", model="missing", prompt="Help.", tools=["ghost"])],
    models=[define_model(name="fast", provider="test", model="t")],
)
"""

WARNS = """
from sa_core.spec import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="{name}",
    agents=[
        define_agent(
            name="pair",
            type="dual_ai",
            side_a={{"prompt": "main"}},
            side_b={{"prompt": "check"}},
        )
    ],
    prompts=[
        define_prompt(name="main", model="fast", prompt="Work."),
        define_prompt(name="check", model="fast", prompt="Check."),
    ],
    models=[define_model(name="fast", provider="test", model="t")],
)
"""

USES_PLUGIN_TOOL = """
from sa_core.spec import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="{name}",
    agents=[define_agent(name="helper", side_a={{"prompt": "main"}})],
    prompts=[define_prompt(name="main", model="fast", tools=["web_search"])],
    models=[define_model(name="fast", provider="test", model="t")],
)
"""


@pytest.fixture(autouse=True)
def isolated_imports() -> Iterator[None]:
    """Undo the loader's sys.path changes and forget the modules it imported from temp dirs."""
    path = list(sys.path)
    modules = set(sys.modules)
    temp = Path(tempfile.gettempdir()).resolve()
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file is not None and Path(file).resolve().is_relative_to(temp):
            del sys.modules[name]
    importlib.invalidate_caches()


def unique(prefix: str = "sa_test_pack") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def write(path: Path, source: str, **fmt: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).format(**fmt), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# sa validate TARGET
# ---------------------------------------------------------------------------------------------


def test_valid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = write(tmp_path / f"{unique()}.py", GOOD, name="demo")
    assert main(["validate", str(file), "--no-plugins"]) == 0
    out = capsys.readouterr().out
    assert "✓ pack demo: 1 agent, 1 prompt, 1 model, 0 tools" in out
    assert "warning" not in out


def test_invalid_file_lists_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = write(tmp_path / f"{unique()}.py", BAD, name="broken")
    assert main(["validate", str(file), "--no-plugins"]) == 1
    out = capsys.readouterr().out
    assert "✗ pack broken: 3 problems" in out
    assert "  - prompt 'main': model 'missing'" in out
    assert "  - prompt 'main': tools entry 'ghost'" in out
    assert "  - agent 'helper' side_a: prompt 'mian'" in out


def test_warnings_are_printed_and_strict_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = write(tmp_path / f"{unique()}.py", WARNS, name="loopy")
    assert main(["validate", str(file), "--no-plugins"]) == 0
    out = capsys.readouterr().out
    assert "✓ pack loopy: 1 agent, 2 prompts, 1 model, 0 tools" in out
    assert "warning: pack loopy: agent 'pair': dual_ai agent has no session_stop" in out
    assert main(["validate", str(file), "--no-plugins", "--strict"]) == 1
    out = capsys.readouterr().out
    assert "✗ pack loopy: 1 warning (--strict)" in out


def test_known_tool_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = write(tmp_path / f"{unique()}.py", USES_PLUGIN_TOOL, name="searcher")
    assert main(["validate", str(file), "--no-plugins"]) == 1
    assert "tools entry 'web_search'" in capsys.readouterr().out
    assert main(["validate", str(file), "--no-plugins", "--tool", "web_search"]) == 0


def test_plugins_are_loaded_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = write(tmp_path / f"{unique()}.py", GOOD, name="demo")
    assert main(["validate", str(file), "--provider", "test"]) == 0
    assert "✓ pack demo" in capsys.readouterr().out


def test_model_whose_provider_is_not_installed_is_a_problem_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = GOOD.replace('provider="test"', 'provider="openia"')
    file = write(tmp_path / f"{unique()}.py", typo, name="typo")
    assert main(["validate", str(file)]) == 1
    out = capsys.readouterr().out
    assert "✗ pack typo: 1 problem" in out
    assert "model 'fast': provider 'openia' is not installed. Did you mean 'openai'?" in out
    assert "Installed providers: " in out and "anthropic" in out


def test_provider_option_counts_a_provider_as_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = write(tmp_path / f"{unique()}.py", GOOD, name="scripted")
    assert main(["validate", str(file)]) == 1
    assert "provider 'test' is not installed" in capsys.readouterr().out
    assert main(["validate", str(file), "--provider", "test"]) == 0


def test_module_and_attribute_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique()
    write(tmp_path / f"{name}.py", GOOD + "\nsecond = Pack(name='other')\n", name="demo")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["validate", name, "--no-plugins"]) == 0
    out = capsys.readouterr().out
    assert "✓ pack demo" in out and "✓ pack other: 0 agents" in out
    assert "2 packs checked, 0 failed." in out
    assert main(["validate", f"{name}:second", "--no-plugins"]) == 0
    out = capsys.readouterr().out
    assert "✓ pack other" in out and "demo" not in out


def test_broken_module_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = write(tmp_path / f"{unique()}.py", "import not_a_real_module_xyz\n")
    assert main(["validate", str(file), "--no-plugins"]) == 1
    out = capsys.readouterr().out
    assert "could not be loaded" in out
    assert "ModuleNotFoundError" in out and "not_a_real_module_xyz" in out


def test_missing_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.py"), "--no-plugins"]) == 1
    assert "does not exist" in capsys.readouterr().out
    assert main(["validate", "no_such_module_xyz", "--no-plugins"]) == 1
    assert "no module named 'no_such_module_xyz'" in capsys.readouterr().out


def test_directory_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    package = unique()
    write(tmp_path / "proj" / package / "__init__.py", GOOD, name="pkgpack")
    assert main(["validate", str(tmp_path / "proj" / package), "--no-plugins"]) == 0
    assert "✓ pack pkgpack" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# load_packs_from
# ---------------------------------------------------------------------------------------------


def test_load_file_returns_packs_in_definition_order(tmp_path: Path) -> None:
    file = write(tmp_path / "pack.py", GOOD + "\nalias = pack\nlater = Pack(name='b')\n", name="a")
    packs = load_packs_from(str(file))
    assert [p.name for p in packs] == ["a", "b"]


def test_files_with_the_same_name_do_not_collide(tmp_path: Path) -> None:
    first = write(tmp_path / "one" / "pack.py", GOOD, name="first")
    second = write(tmp_path / "two" / "pack.py", GOOD, name="second")
    assert [p.name for p in load_packs_from(str(first))] == ["first"]
    assert [p.name for p in load_packs_from(str(second))] == ["second"]


def test_packages_with_the_same_name_do_not_collide(tmp_path: Path) -> None:
    name = unique()
    write(tmp_path / "one" / name / "__init__.py", GOOD, name="first")
    write(tmp_path / "two" / name / "__init__.py", GOOD, name="second")
    assert [p.name for p in load_packs_from(str(tmp_path / "one" / name))] == ["first"]
    assert [p.name for p in load_packs_from(str(tmp_path / "two" / name))] == ["second"]


def test_file_shadowing_an_imported_module_is_refused(tmp_path: Path) -> None:
    import json

    file = write(tmp_path / "json.py", GOOD, name="shadow")
    with pytest.raises(PackLoadError, match="a different module named 'json' is already imported"):
        load_packs_from(str(file))
    assert sys.modules["json"] is json


def test_file_importing_a_sibling_module(tmp_path: Path) -> None:
    helper = unique("sa_test_helper")
    write(tmp_path / f"{helper}.py", "PACK_NAME = 'sibling'\n")
    file = write(
        tmp_path / f"{unique()}.py",
        f"from {helper} import PACK_NAME\n"
        "from sa_core.spec import Pack\n"
        "pack = Pack(name=PACK_NAME)\n",
    )
    assert [p.name for p in load_packs_from(str(file))] == ["sibling"]


def test_package_pack_submodule(tmp_path: Path) -> None:
    package = unique()
    write(tmp_path / package / "__init__.py", "")
    write(tmp_path / package / "pack.py", GOOD, name="nested")
    assert [p.name for p in load_packs_from(str(tmp_path / package))] == ["nested"]


def test_project_with_pyproject_entry_points(tmp_path: Path) -> None:
    package = unique()
    project = tmp_path / "my-project"
    write(
        project / "pyproject.toml",
        f"""
        [project]
        name = "my-project"
        version = "0.1.0"

        [project.entry-points."sa.packs"]
        declared = "{package}.definitions:pack"
        """,
    )
    write(project / "src" / package / "__init__.py", "")
    write(project / "src" / package / "definitions.py", GOOD, name="declared")
    write(project / "src" / package / "unused.py", GOOD, name="unused")
    assert [p.name for p in load_packs_from(str(project))] == ["declared"]


def test_project_without_entry_points_scans_packages(tmp_path: Path) -> None:
    package = unique()
    project = tmp_path / "proj"
    write(project / "pyproject.toml", '[project]\nname = "proj"\nversion = "1"\n')
    write(project / package / "__init__.py", GOOD, name="scanned")
    write(project / "tests" / "__init__.py", "raise RuntimeError('tests are not scanned')\n")
    assert [p.name for p in load_packs_from(str(project))] == ["scanned"]


def test_directory_without_packs(tmp_path: Path) -> None:
    write(tmp_path / "empty" / "notes.py", "X = 1\n")
    with pytest.raises(PackLoadError, match="no Pack found"):
        load_packs_from(str(tmp_path / "empty"))


def test_attribute_that_is_not_a_pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = unique()
    write(tmp_path / f"{name}.py", GOOD + "\nnot_a_pack = 3\n", name="demo")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PackLoadError, match="it is a int, not a Pack"):
        load_packs_from(f"{name}:not_a_pack")
    with pytest.raises(PackLoadError, match="has no attribute 'missing'"):
        load_packs_from(f"{name}:missing")


def test_module_without_packs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = unique()
    write(tmp_path / f"{name}.py", "X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PackLoadError, match="defines no Pack at top level"):
        load_packs_from(name)


def test_error_inside_a_module_names_the_location(tmp_path: Path) -> None:
    file = write(tmp_path / f"{unique()}.py", "x = 1\nraise ValueError('boom')\n")
    with pytest.raises(PackLoadError) as caught:
        load_packs_from(str(file))
    assert "ValueError: boom" in str(caught.value)
    assert f"{file}:2" in str(caught.value)
    assert file.stem not in sys.modules


def test_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "typo_pack.py"
    broken.write_text("x = 1\ndef f(:\n")
    with pytest.raises(PackLoadError) as info:
        load_packs_from(str(broken))
    assert str(info.value).endswith(f"SyntaxError: invalid syntax (at {broken}:2)")


def test_garbage_target() -> None:
    with pytest.raises(PackLoadError, match="not an existing file or directory"):
        load_packs_from("not a module!")


# ---------------------------------------------------------------------------------------------
# installed_packs
# ---------------------------------------------------------------------------------------------


def make_distribution(site: Path, dist: str, entry_points: dict[str, str]) -> None:
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n", encoding="utf-8"
    )
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[sa.packs]\n{lines}\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private site directory whose distributions are the only installed packs."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))

    def fake_entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        found: list[importlib.metadata.EntryPoint] = []
        for dist in importlib.metadata.distributions(path=[str(root)]):
            found.extend(ep for ep in dist.entry_points if ep.group == group)
        return found

    monkeypatch.setattr(packloader, "entry_points", fake_entry_points)
    return root


def test_installed_packs_skips_broken_entry_points(site: Path) -> None:
    good, broken, wrong, renamed, invalid = (unique() for _ in range(5))
    write(site / f"{good}.py", GOOD, name="good")
    write(site / f"{broken}.py", "raise ImportError('missing dependency')\n")
    write(site / f"{wrong}.py", "pack = 'not a pack'\n")
    write(site / f"{renamed}.py", GOOD, name="something_else")
    write(site / f"{invalid}.py", BAD, name="invalid")
    make_distribution(site, "sa-good", {"good": f"{good}:pack"})
    make_distribution(site, "sa-broken", {"broken": f"{broken}:pack"})
    make_distribution(site, "sa-wrong", {"wrong": f"{wrong}:pack"})
    make_distribution(site, "sa-renamed", {"renamed": f"{renamed}:pack"})
    make_distribution(site, "sa-invalid", {"invalid": f"{invalid}:pack"})

    loaded, errors = installed_packs()

    assert [(info.name, pack.name) for info, pack in loaded] == [("good", "good")]
    info = loaded[0][0]
    assert isinstance(info, EntryPointInfo)
    assert (info.value, info.distribution, info.version) == (f"{good}:pack", "sa-good", "1.2.3")
    assert info.location is not None and Path(info.location) == site
    by_dist = {e.source.split(" of distribution ")[1].split()[0]: e for e in errors}
    assert sorted(by_dist) == ["sa-broken", "sa-invalid", "sa-renamed", "sa-wrong"]
    assert "ImportError: missing dependency" in by_dist["sa-broken"].reason
    assert "it loads a str, not a Pack" in by_dist["sa-wrong"].reason
    assert "entry-point name is 'renamed'" in by_dist["sa-renamed"].reason
    assert isinstance(by_dist["sa-invalid"].__cause__, PackValidationError)
    assert len(by_dist["sa-invalid"].__cause__.problems) == 3


def test_installed_packs_without_validation(site: Path) -> None:
    invalid = unique()
    write(site / f"{invalid}.py", BAD, name="invalid")
    make_distribution(site, "sa-invalid", {"invalid": f"{invalid}:pack"})
    loaded, errors = installed_packs(validate=False)
    assert [pack.name for _, pack in loaded] == ["invalid"] and errors == []


def test_duplicate_installed_pack_names(site: Path) -> None:
    first, second = unique(), unique()
    write(site / f"{first}.py", GOOD, name="same")
    write(site / f"{second}.py", GOOD, name="same")
    make_distribution(site, "sa-first", {"same": f"{first}:pack"})
    make_distribution(site, "sa-second", {"same": f"{second}:pack"})
    loaded, errors = installed_packs()
    assert len(loaded) == 1 and len(errors) == 1
    assert "is already provided by" in errors[0].reason


def test_installed_packs_may_reference_each_other(site: Path) -> None:
    base, user = unique(), unique()
    write(site / f"{base}.py", GOOD, name="base")
    write(
        site / f"{user}.py",
        GOOD.replace('prompt="Help.")', 'prompt="Help.", tools=["base/helper"])'),
        name="user",
    )
    make_distribution(site, "sa-base", {"base": f"{base}:pack"})
    make_distribution(site, "sa-user", {"user": f"{user}:pack"})
    loaded, errors = installed_packs()
    assert errors == []
    assert sorted(p.name for _, p in loaded) == ["base", "user"]


def test_validate_all_installed(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, broken = unique(), unique()
    write(site / f"{good}.py", GOOD, name="good")
    write(site / f"{broken}.py", "raise RuntimeError('kaput')\n")
    make_distribution(site, "sa-good", {"good": f"{good}:pack"})
    make_distribution(site, "sa-broken", {"broken": f"{broken}:pack"})
    assert main(["validate", "--no-plugins"]) == 1
    out = capsys.readouterr().out
    assert "✓ pack good: 1 agent" in out
    assert "✗ Pack from entry point 'broken" in out and "sa-broken 1.2.3" in out
    assert "RuntimeError: kaput" in out
    assert "2 packs checked, 1 failed." in out


def test_validate_with_nothing_installed(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--no-plugins"]) == 0
    assert "No packs installed" in capsys.readouterr().out


def test_target_may_reference_installed_packs(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = unique()
    write(site / f"{base}.py", GOOD, name="base")
    make_distribution(site, "sa-base", {"base": f"{base}:pack"})
    file = write(
        tmp_path / f"{unique()}.py",
        GOOD.replace('prompt="Help.")', 'prompt="Help.", tools=["base/helper"])'),
        name="user",
    )
    assert main(["validate", str(file), "--no-plugins"]) == 0
    assert "✓ pack user" in capsys.readouterr().out
