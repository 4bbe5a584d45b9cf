"""Discovery of installed packs: `sa.packs` entry points, broken packs reported and skipped."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from sa_core import Runtime
from sa_core.cli import main
from sa_core.packaging import installed_pack_infos
from sa_core.packloader import installed_packs
from sa_core.testing import TestProvider, TestScript

GOOD = """
from sa_core import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="{pack_id}",
    agents=[define_agent(name="{agent}", side_a={{"prompt": "main"}}, author="Grace")],
    prompts=[define_prompt(name="main", model="m", prompt="Hi.")],
    models=[define_model(name="m", provider="test", model="m")],
    license="ISC",
)
"""


def fake_distribution(
    site: Path, dist: str, version: str, entry_points: dict[str, str], **metadata: str
) -> None:
    """Write the .dist-info of an installed distribution into ``site``."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    headers = {"Metadata-Version": "2.4", "Name": dist, "Version": version, **metadata}
    (info / "METADATA").write_text("".join(f"{k}: {v}\n" for k, v in headers.items()))
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[sa.packs]\n{lines}")


def reason_for(errors, kind: str) -> str:
    """The reason given for the fake distribution ``sa-<kind>-pack``."""
    (error,) = [e for e in errors if f"of distribution sa-{kind}-pack " in e.source]
    return error.reason


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A site directory on sys.path holding one good and three broken pack distributions."""
    suffix = tmp_path.name.replace("-", "_")
    good, broken, wrong = (f"{kind}_{suffix}" for kind in ("good", "broken", "wrong"))
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{good}.py").write_text(GOOD.format(pack_id=good, agent=f"helper_{suffix}"))
    (site / f"{broken}.py").write_text("raise RuntimeError('boom at import')\n")
    (site / f"{wrong}.py").write_text(GOOD.format(pack_id="other_name", agent="x"))
    fake_distribution(
        site,
        "sa-good-pack",
        "1.2.3",
        {good: f"{good}:pack"},
        **{"Author-email": "Grace <g@example.com>", "License-Expression": "MIT"},
    )
    fake_distribution(site, "sa-broken-pack", "0.0.1", {broken: f"{broken}:pack"})
    fake_distribution(site, "sa-wrong-pack", "0.0.2", {f"id_{suffix}": f"{wrong}:pack"})
    fake_distribution(site, "sa-missing-pack", "0.0.3", {f"gone_{suffix}": f"gone_{suffix}:pack"})
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield {"good": good, "agent": f"helper_{suffix}", "broken": broken}
    for name in (good, broken, wrong):
        sys.modules.pop(name, None)


def test_broken_packs_are_reported_with_their_distribution_and_skipped(site) -> None:
    loaded, errors = installed_packs()
    assert site["good"] in [pack.name for _, pack in loaded]
    reasons = {dist: reason_for(errors, dist) for dist in ("broken", "wrong", "missing")}
    assert "import failed: RuntimeError: boom at import" in reasons["broken"]
    assert "it loads pack 'other_name', but the entry-point name is" in reasons["wrong"]
    assert "import failed: ModuleNotFoundError" in reasons["missing"]


def test_installed_pack_infos_describe_distribution_author_license_and_origin(site) -> None:
    infos, errors = installed_pack_infos()
    (info,) = [i for i in infos if i.package_id == site["good"]]
    assert (info.distribution, info.version) == ("sa-good-pack", "1.2.3")
    assert info.author == "Grace <g@example.com>" and info.license == "MIT"
    assert info.entry_agents == [site["agent"]]
    assert info.origin.startswith("installed in ") and info.packed_by_sa is False
    assert any("sa-broken-pack" in str(e) for e in errors)


def test_sa_packs_lists_good_packs_and_reports_broken_ones(site, capsys) -> None:
    code = main(["packs"])
    captured = capsys.readouterr()
    assert code == 1
    assert f"{site['good']}  sa-good-pack 1.2.3" in captured.out
    assert "  license:      MIT" in captured.out
    assert f"  entry agents: {site['agent']}" in captured.out
    assert "broken: Pack from entry point" in captured.err and "sa-broken-pack" in captured.err
    assert "failed to load and were skipped" in captured.err
    assert main(["packs", "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert any(p["distribution"] == "sa-good-pack" for p in payload["packs"])
    assert any("sa-broken-pack" in e["source"] for e in payload["errors"])


@pytest.mark.asyncio
async def test_runtime_loads_installed_packs_and_skips_broken_ones(site, sa_database_url) -> None:
    provider = TestProvider(TestScript().add_text_response("hello from an installed pack"))
    async with Runtime(providers={"test": provider}, database_url=sa_database_url) as runtime:
        assert runtime.pack_sources[site["good"]].distribution == "sa-good-pack"
        assert any("sa-broken-pack" in e.source for e in runtime.pack_errors)
        thread = await runtime.create_thread(f"{site['good']}/{site['agent']}")
        await thread.send_message("hi")
        page = await thread.get_messages()
    assert page.messages[-1].content == "hello from an installed pack"
