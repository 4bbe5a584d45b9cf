"""Checking remote agent definitions: every problem at once, and ``sa validate --online``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sa_core import (
    Pack,
    PackValidationError,
    RemoteAgentDefinition,
    define_agent,
    define_model,
    define_prompt,
    define_remote_agent,
    define_tool,
)
from sa_core.engine.tools.tools import build_tool_table
from sa_core.registry import Registry

MODEL = define_model(name="m", provider="test", model="x")


def desk(*remotes: RemoteAgentDefinition, tools: list[object] | None = None) -> Pack:
    entries = tools if tools is not None else [{"name": r.name} for r in remotes]
    main = define_prompt(name="main", model="m", prompt="Boss.", tools=entries)
    return Pack(
        name="desk",
        agents=[define_agent(name="boss", side_a={"prompt": "main"})],
        prompts=[main],
        models=[MODEL],
        tools=[define_tool(name="clash", description="A tool.", execute=lambda s: "x")],
        remote_agents=list(remotes),
    )


def test_every_problem_of_a_remote_agent_is_listed_at_once() -> None:
    broken = define_remote_agent(
        name="bad name",
        url="ftp://agents.example.com",
        headers={"X Key": "${unclosed", "Authorization": "Bearer ${not-a-name}"},
        timeout=0,
    )
    clash = define_remote_agent(name="clash", url="https://agents.example.com")
    pack = desk(broken, clash, tools=[])
    with pytest.raises(PackValidationError) as raised:
        pack.validate()
    problems = raised.value.problems
    expected = [
        "remote agent 'bad name': name is not a valid function name",
        "remote agent 'bad name': url 'ftp://agents.example.com' must be an http:// or https://",
        "remote agent 'bad name': header name 'X Key' is not a valid HTTP header name",
        "remote agent 'bad name': header 'X Key' has an unclosed '${'",
        "remote agent 'bad name': header 'Authorization' references '${not-a-name}'",
        "remote agent 'bad name': timeout must be a positive number of seconds (got 0",
        "remote agent 'clash': a tool of the pack has the same name",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), (start, problems)


def test_a_remote_entry_validates_like_a_subagent_and_refuses_side_b() -> None:
    remote = define_remote_agent(name="research", url="https://agents.example.com/card.json")
    good = desk(remote, tools=[{"name": "research", "blocking": False, "resumable": {}}])
    good.validate()
    side_b = {"name": "research", "resumable": {"receives_messages": "side_b"}}
    with pytest.raises(PackValidationError) as raised:
        desk(remote, tools=[side_b]).validate()
    assert any("is a remote agent, which has one side" in p for p in raised.value.problems)


def test_undeclared_header_variable_is_a_warning() -> None:
    remote = define_remote_agent(
        name="research", url="https://a.example.com", headers={"Authorization": "Bearer ${KEY}"}
    )
    warnings = desk(remote).warnings()
    assert any("header variable 'KEY' is not declared with type='secret'" in w for w in warnings)


def test_the_tool_takes_a_message_and_is_described_by_the_definition_or_a_default() -> None:
    described = define_remote_agent(
        name="research", url="https://a.example.com", tool_description="Researches things."
    )
    plain = define_remote_agent(name="scout", url="https://b.example.com/")
    pack = desk(described, plain)
    scope = Registry([pack]).scope("desk")
    table = build_tool_table(scope, scope.prompts["main"])
    research, scout = table.tools["research"], table.tools["scout"]
    assert research.kind == "subagent" and research.description == "Researches things."
    assert research.parameters["required"] == ["message"]
    assert scout.description == (
        "Delegate work to the remote agent 'scout' (A2A, "
        "https://b.example.com/.well-known/agent-card.json)."
    )
    assert plain.card_url == "https://b.example.com/.well-known/agent-card.json"
    assert described.as_agent().type == "dual_ai" and described.as_agent().expose_as_tool


PACK_FILE = """
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent
pack = Pack(
    name="online",
    agents=[define_agent(name="boss", side_a={{"prompt": "main"}})],
    prompts=[define_prompt(name="main", model="m", prompt="Boss.", tools=["helper"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=[define_remote_agent(name="helper", url="{url}")],
)
"""


def validate_online(tmp: Path, url: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "online_pack.py"
    path.write_text(PACK_FILE.format(url=url))
    return subprocess.run(
        [sys.executable, "-m", "sa_core.cli", "validate", str(path), "--online", "--no-plugins"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_validate_online_reads_the_card(tmp_path: Path) -> None:
    pytest.importorskip("a2a.server")
    from a2a_sdk_agent import SdkAgent

    with SdkAgent() as agent:
        fine = validate_online(tmp_path, agent.base)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "pack online: 1 agent, 1 prompt, 1 model, 0 tools, 1 remote agent" in fine.stdout

    gone = validate_online(tmp_path, agent.base)
    assert gone.returncode == 1
    card = f"{agent.base}/.well-known/agent-card.json"
    assert f"- Remote agent 'helper' ({card})" in gone.stdout


DESK_PROJECT = """
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent

research = define_remote_agent(
    name="research",
    url="https://agents.example.com/a2a/r/researcher/.well-known/agent-card.json",
    headers={"Authorization": "Bearer ${RESEARCH_KEY}"},
    timeout=120,
)
pack = Pack(
    name="desk",
    agents=[define_agent(name="boss", side_a={"prompt": "main"},
                         variables=[{"name": "RESEARCH_KEY", "type": "secret"}])],
    prompts=[define_prompt(name="main", model="m", prompt="Boss.",
                           tools=[{"name": "research", "blocking": False}])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=[research],
)
"""


def test_sa_pack_carries_the_remote_agents_an_agent_uses(tmp_path: Path) -> None:
    from sa_core.packaging import pack_agent
    from sa_core.packloader import load_packs_from

    project = tmp_path / "desk_project"
    project.mkdir()
    (project / "__init__.py").write_text(DESK_PROJECT)
    result = pack_agent(str(project), "boss", out=tmp_path / "out", build=False)
    (pack,) = load_packs_from(str(result.project))
    [remote] = pack.remote_agents
    assert (remote.name, remote.timeout) == ("research", 120)
    assert remote.headers == {"Authorization": "Bearer ${RESEARCH_KEY}"}
    external = " ".join(result.closure.external)
    assert "remote agent 'research' (an A2A agent at https://agents.example.com" in external
    assert "and set RESEARCH_KEY" in external
