"""`sa pack` and `sa unpack`: the generated project, its build, and re-packing."""

from __future__ import annotations

import json
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from sa_core import Runtime
from sa_core.cli import main
from sa_core.errors import DefinitionNotFoundError
from sa_core.packaging import PackagingError, pack_agent, unpack_distribution
from sa_core.packloader import load_packs_from
from sa_core.testing import TestProvider, TestScript

FIXTURES = Path(__file__).parent / "fixtures" / "packaging"
WEATHER = str(FIXTURES / "weather_desk")


def pyproject(project: Path) -> dict:
    return tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """One packed and built distribution of the forecaster agent, shared by the module."""
    out = tmp_path_factory.mktemp("built") / "sa-pack-forecaster"
    return pack_agent(WEATHER, "forecaster", out=out)


def test_pack_writes_pyproject_readme_license_and_identity(tmp_path: Path) -> None:
    result = pack_agent(WEATHER, "forecaster", out=tmp_path / "out", build=False)
    project = result.project
    data = pyproject(project)["project"]
    assert data["name"] == "sa-pack-forecaster" and data["version"] == "0.1.0"
    assert data["license"] == "MIT" and data["license-files"] == ["LICENSE"]
    assert data["authors"] == [{"name": "Ada Lovelace", "email": "ada@example.com"}]
    assert (
        data["dependencies"][0].startswith("standard-agents>=")
        and "pydantic" in data["dependencies"]
    )
    assert data["entry-points"]["sa.packs"] == {"forecaster": "sa_pack_forecaster:pack"}
    table = pyproject(project)["tool"]["standard-agents"]
    assert table["package-id"] == "forecaster" and table["version"] == "0.1.0"
    identity = json.loads((project / "sa_pack_forecaster" / "_pack.json").read_text())
    assert identity["entry_agents"] == ["forecaster"] and identity["packed_at"] > 0
    assert identity["items"]["tools"] == ["weather", "shout", "approve"]
    readme = (project / "README.md").read_text()
    assert "Reports the weather for any city." in readme
    assert "- `weather`: Current weather for a city." in readme
    assert "`researcher` (subagent, dual_ai)" in readme and "`UNITS`" in readme
    license_file = (project / "LICENSE").read_text()
    assert license_file.startswith("MIT License") and "Ada Lovelace" in license_file
    vendored = project / "sa_pack_forecaster" / "_vendor" / "weather_desk"
    assert sorted(p.name for p in vendored.glob("*.py")) == [
        "__init__.py",
        "helpers.py",
        "tools.py",
    ]
    tools_source = (vendored / "tools.py").read_text()
    assert "from sa_pack_forecaster._vendor.weather_desk.helpers import describe" in tools_source


@pytest.mark.asyncio
async def test_packed_project_loads_on_its_own_code_and_runs(
    tmp_path: Path, sa_database_url
) -> None:
    result = pack_agent(WEATHER, "forecaster", out=tmp_path / "out", build=False)
    (pack,) = load_packs_from(str(result.project))
    assert pack.name == "forecaster" and pack.entry_agent_names() == ["forecaster"]
    assert [a.name for a in pack.agents] == ["forecaster", "researcher", "billing"]
    weather = pack.tools[0]
    assert weather.execute.__module__ == "sa_pack_forecaster._vendor.weather_desk.tools"
    assert pack.agents[0].package_name == "sa-pack-forecaster" and pack.agents[0].version == "0.1.0"
    script = (
        TestScript()
        .add_tool_call_response([{"name": "weather", "arguments": {"city": "Oslo"}}])
        .add_text_response("Sunny, it seems.")
    )
    provider = TestProvider(script)
    async with Runtime(
        packs=[pack],
        providers={"test": provider},
        database_url=sa_database_url,
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("forecaster/forecaster")
        await thread.send_message("Weather in Oslo?")
        await runtime.wait_idle(timeout=60)
        page = await thread.get_messages()
    assert [m.content for m in page.messages][-2:] == ["Sunny in Oslo", "Sunny, it seems."]
    assert provider.tool_names(provider.requests[0]) == [
        "weather",
        "shout",
        "summarize",
        "researcher",
        "billing",
    ]


@pytest.mark.asyncio
async def test_definitions_without_module_level_names_are_picked_from_the_source(
    tmp_path: Path, sa_database_url
) -> None:
    result = pack_agent(
        str(FIXTURES / "closures_pack.py"), "counter", out=tmp_path / "out", build=False
    )
    definitions = (result.project / "sa_pack_counter" / "definitions.py").read_text()
    assert "_pick(src_closures_pack.pack.tools, 'count')" in definitions
    assert (result.project / "sa_pack_counter" / "_vendor" / "closures_pack.py").is_file()
    assert (result.project / "LICENSE").read_text().lstrip().startswith("Copyright")
    (pack,) = load_packs_from(str(result.project))
    provider = TestProvider(
        TestScript()
        .add_tool_call_response([{"name": "count", "arguments": {}}])
        .add_text_response("ok")
    )
    async with Runtime(
        packs=[pack],
        providers={"test": provider},
        database_url=sa_database_url,
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("counter")
        await thread.send_message("count")
        page = await thread.get_messages()
    assert page.messages[2].content == "counted 1"


def test_a_failed_build_leaves_the_earlier_output_and_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    pack_agent(WEATHER, "forecaster", out=out, build=False)
    earlier = (out / "pyproject.toml").read_text(encoding="utf-8")

    def fail(*args: object, **kwargs: object) -> None:
        raise PackagingError("building failed: no backend")

    monkeypatch.setattr("sa_core.packaging.packer.build_distributions", fail)
    with pytest.raises(PackagingError, match="no backend"):
        pack_agent(WEATHER, "forecaster", out=out)
    assert (out / "pyproject.toml").read_text(encoding="utf-8") == earlier
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging left behind
    again = pack_agent(WEATHER, "forecaster", out=out, build=False)
    assert (again.identity.version, again.previous_version) == ("0.1.1", "0.1.0")


def test_repacking_keeps_the_identity_and_bumps_the_version(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = pack_agent(WEATHER, "forecaster", out=out, build=False)
    second = pack_agent(WEATHER, "forecaster", out=out, build=False)
    assert (first.identity.version, second.identity.version) == ("0.1.0", "0.1.1")
    assert second.previous_version == "0.1.0"
    third = pack_agent(str(out), "forecaster", out=tmp_path / "again", build=False)
    assert third.identity.version == "0.1.2"
    for result in (second, third):
        assert (
            result.identity.distribution,
            result.identity.module,
            result.identity.package_id,
        ) == ("sa-pack-forecaster", "sa_pack_forecaster", "forecaster")
    assert (
        "'version': '0.1.2'"
        in (third.project / "sa_pack_forecaster" / "definitions.py").read_text()
    )
    chosen = pack_agent(
        WEATHER, "forecaster", out=out, build=False, version="2.0.0", license_id="ISC"
    )
    assert chosen.identity.version == "2.0.0"
    assert pyproject(out)["project"]["license"] == "ISC"


def test_pack_refuses_foreign_or_source_output_directories(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(PackagingError, match="not an earlier output of sa pack"):
        pack_agent(WEATHER, "forecaster", out=foreign, build=False)
    assert (foreign / "notes.txt").read_text() == "mine"
    with pytest.raises(PackagingError, match="holds the source being packed"):
        pack_agent(WEATHER, "forecaster", out=FIXTURES, build=False)
    with pytest.raises(DefinitionNotFoundError, match="forecaster"):
        pack_agent(WEATHER, "forcaster", out=tmp_path / "x", build=False)


def test_built_wheel_carries_metadata_license_entry_point_and_identity(built) -> None:
    sdist, wheel = built.files
    assert sdist.name == "sa_pack_forecaster-0.1.0.tar.gz"
    assert wheel.name == "sa_pack_forecaster-0.1.0-py3-none-any.whl"
    assert "PASSED" in built.check_report and "FAILED" not in built.check_report
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = "sa_pack_forecaster-0.1.0.dist-info"
        meta = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert {
        "sa_pack_forecaster/__init__.py",
        "sa_pack_forecaster/definitions.py",
        "sa_pack_forecaster/_pack.json",
        "sa_pack_forecaster/_vendor/weather_desk/tools.py",
        f"{info}/licenses/LICENSE",
    } <= names
    assert meta["Name"] == "sa-pack-forecaster" and meta["License-Expression"] == "MIT"
    assert meta["Author-email"] == "Ada Lovelace <ada@example.com>"
    assert any(r.startswith("standard-agents>=") for r in meta.get_all("Requires-Dist"))
    assert "[sa.packs]\nforecaster = sa_pack_forecaster:pack" in entry_points


def test_unpack_then_pack_keeps_metadata_and_bumps_the_version(built, tmp_path: Path) -> None:
    wheel = built.files[1]
    unpacked = unpack_distribution(str(wheel), tmp_path / "project")
    project = unpacked.project
    assert unpacked.entry_points == {"forecaster": "sa_pack_forecaster:pack"}
    assert unpacked.identity is not None and unpacked.identity.version == "0.1.0"
    data = pyproject(project)
    assert data["project"]["name"] == "sa-pack-forecaster" and data["project"]["version"] == "0.1.0"
    assert data["project"]["license"] == "MIT"
    assert data["tool"]["standard-agents"]["package-id"] == "forecaster"
    assert (project / "LICENSE").read_text().startswith("MIT License")
    assert "# sa-pack-forecaster" in (project / "README.md").read_text()
    assert (project / "tests" / "test_sa_pack_forecaster.py").is_file()
    definitions = project / "sa_pack_forecaster" / "definitions.py"
    definitions.write_text(definitions.read_text().replace("Be brief and friendly.", "Be terse."))
    again = pack_agent(str(project), "forecaster", out=tmp_path / "again", build=False)
    assert again.identity.version == "0.1.1" and again.identity.distribution == "sa-pack-forecaster"
    assert again.identity.package_id == "forecaster" and again.license_id == "MIT"
    assert again.identity.author == "Ada Lovelace <ada@example.com>"
    assert "Be terse." in (again.project / "sa_pack_forecaster" / "definitions.py").read_text()


def test_unpack_finds_installed_packs_by_distribution_or_pack_id(built, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(built.files[1]) as archive:
        archive.extractall(site)
    by_id = unpack_distribution("forecaster", tmp_path / "a", path=[str(site)])
    by_name = unpack_distribution("SA_Pack.Forecaster", tmp_path / "b", path=[str(site)])
    assert by_id.distribution == by_name.distribution == "sa-pack-forecaster"
    with pytest.raises(PackagingError, match="not empty"):
        unpack_distribution("forecaster", tmp_path / "a", path=[str(site)])
    with pytest.raises(PackagingError, match="no installed distribution or pack named 'nope'"):
        unpack_distribution("nope", tmp_path / "c", path=[str(site)])


def test_sa_pack_prints_what_went_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["pack", WEATHER, "--agent", "forecaster", "--out", str(tmp_path / "o"), "--no-build"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Packed agent 'forecaster' of pack 'weather_desk' as sa-pack-forecaster 0.1.0" in out
    assert "agents       forecaster, researcher (subagent), billing (handoff)" in out
    assert "effects      notify" in out and "endpoints    get_status" in out
    assert "copied       weather_desk (package" in out
    assert "shared       prompt 'house_style' is also used by agent 'greeter' (copied)" in out


def test_cli_errors_say_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["pack", WEATHER, "--agent", "nobody", "--no-build", "--out", str(tmp_path / "o")])
        == 1
    )
    assert "Unknown agent 'nobody'" in capsys.readouterr().err
    assert main(["publish", str(tmp_path)]) == 1
    assert "no wheel or sdist" in capsys.readouterr().err
    assert (
        main(
            [
                "pack",
                WEATHER,
                "--agent",
                "forecaster",
                "--license",
                "Not A License",
                "--no-build",
                "--out",
                str(tmp_path / "p"),
            ]
        )
        == 1
    )
    assert "not a valid SPDX" in capsys.readouterr().err


SCHEDULED_PACK = '''
from sa_core import Pack, define_agent, define_model, define_prompt, define_schedule

pack = Pack(
    name="newsroom",
    agents=[
        define_agent(name="writer", side_a={"prompt": "main"}, license="MIT"),
        define_agent(name="editor", side_a={"prompt": "main"}, license="MIT"),
    ],
    prompts=[define_prompt(name="main", model="m", prompt="Write.")],
    models=[define_model(name="m", provider="test", model="m")],
    schedules=[
        define_schedule(name="digest", agent="writer", cron="0 8 * * 1-5",
                        timezone="Europe/Riga", message="Write the digest.", thread="reuse"),
        define_schedule(name="review", agent="editor", every="1h", message="Review."),
    ],
)
'''


def test_a_packed_agent_takes_its_schedules_along(tmp_path: Path) -> None:
    source = tmp_path / "newsroom.py"
    source.write_text(SCHEDULED_PACK)
    result = pack_agent(str(source), "writer", out=tmp_path / "out", build=False)
    definitions = (result.project / "sa_pack_writer" / "definitions.py").read_text()
    assert "ScheduleDefinition.model_validate(" in definitions
    (pack,) = load_packs_from(str(result.project))
    (digest,) = pack.schedules  # the editor's schedule stays behind with the editor
    assert (digest.name, digest.agent, digest.cron, digest.timezone, digest.thread) == (
        "digest",
        "writer",
        "0 8 * * 1-5",
        "Europe/Riga",
        "reuse",
    )
    pack.validate()
