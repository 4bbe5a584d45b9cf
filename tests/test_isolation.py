"""Package isolation through the public API.

A pack's prompts, tools, hooks and models are private; only its entry agents are reachable
from other packs, as ``package/agent``. Tool names shown to a model stay unqualified.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_hook, define_model, define_prompt, define_tool
from sa_core.errors import DefinitionNotFoundError, PackValidationError
from sa_core.testing import FunctionProvider


class Summary(BaseModel):
    summary: str


def routed(**queues):
    """A FunctionProvider answering per wire model id from scripted queues."""
    queues = {k: list(v) for k, v in queues.items()}
    seen: dict[str, list] = {k: [] for k in queues}

    def answer(request):
        seen[request.model].append(request)
        if not queues[request.model]:
            raise AssertionError(f"no scripted answer left for {request.model}")
        return queues[request.model].pop(0)

    provider = FunctionProvider(answer)
    provider.seen = seen
    return provider


def lookup(label: str):
    return define_tool(
        name="lookup", description=f"{label} lookup.", execute=lambda state, args: f"{label} data"
    )


def desk_pack() -> Pack:
    """Pack ``desk``: entry agents ``front`` (handoff target) and ``researcher`` (subagent)."""
    approve = define_tool(
        name="approve", description="Approve.", args=Summary, execute=lambda s, a: "ok"
    )
    return Pack(
        name="desk",
        models=[define_model(name="m", provider="test", model="desk")],
        prompts=[
            define_prompt(name="front_main", model="m", prompt="Desk front.", include_chat=True),
            define_prompt(
                name="worker", model="m", prompt="Work.", include_chat=True, tools=["lookup"]
            ),
            define_prompt(
                name="reviewer", model="m", prompt="Review.", include_chat=True, tools=["approve"]
            ),
            define_prompt(name="back_main", model="m", prompt="Back office."),
        ],
        agents=[
            define_agent(
                name="front",
                side_a={"prompt": "front_main"},
                expose_as_tool=True,
                tool_description="The desk's front office.",
            ),
            define_agent(
                name="researcher",
                type="dual_ai",
                expose_as_tool=True,
                max_session_turns=3,
                tool_description="Researches for other packs.",
                side_a={"prompt": "worker"},
                side_b={
                    "prompt": "reviewer",
                    "stop_on_response": False,
                    "session_stop": {"name": "approve", "message_property": "summary"},
                },
            ),
            define_agent(
                name="back_office",
                side_a={"prompt": "back_main"},
                expose_as_tool=True,
                tool_description="Internal.",
            ),
        ],
        tools=[lookup("desk"), approve],
        hooks=[define_hook(id="desk_trim", hook="filter_messages", execute=lambda s, m: m)],
        entry_agents=["front", "researcher"],
    )


def client_pack(tools: list, hooks: tuple[str, ...] = ()) -> Pack:
    return Pack(
        name="client",
        models=[define_model(name="m", provider="test", model="client")],
        prompts=[
            define_prompt(
                name="main",
                model="m",
                prompt="Client.",
                include_chat=True,
                tools=tools,
                hooks=list(hooks),
            )
        ],
        agents=[define_agent(name="assistant", side_a={"prompt": "main"})],
        tools=[lookup("client")],
    )


@pytest.mark.asyncio
async def test_two_packs_each_get_their_own_tool_of_the_same_name(sa_runtime_factory) -> None:
    call = {"tool_calls": [{"name": "lookup", "arguments": {}}]}
    provider = routed(client=[call, "client done"], desk=[call, "desk done"])
    client = client_pack(["lookup"])
    desk = desk_pack()
    desk.prompts[0].tools.append("lookup")
    async with sa_runtime_factory(packs=[client, desk], providers={"test": provider}) as runtime:
        mine = await runtime.create_thread("assistant")
        await mine.send_message("look it up")
        theirs = await runtime.create_thread("desk/front")
        await theirs.send_message("look it up")
        client_page, desk_page = await mine.get_messages(), await theirs.get_messages()
    assert client_page.messages[2].content == "client data"
    assert desk_page.messages[2].content == "desk data"
    offered = [
        [t.name for t in r.tools] for r in (provider.seen["client"][0], provider.seen["desk"][0])
    ]
    assert offered == [["lookup"], ["lookup"]]
    assert provider.seen["client"][0].tools[0].description == "client lookup."


@pytest.mark.asyncio
async def test_a_pack_cannot_reach_another_packs_non_entry_agent(sa_runtime_factory) -> None:
    with pytest.raises(PackValidationError) as caught:
        async with sa_runtime_factory(packs=[client_pack(["desk/back_office"]), desk_pack()]):
            pass
    assert "only entry agents are reachable across packs" in str(caught.value)
    async with sa_runtime_factory(packs=[client_pack([]), desk_pack()]) as runtime:
        with pytest.raises(DefinitionNotFoundError, match="entry agents are reachable from outside"):
            await runtime.create_thread("desk/back_office")


@pytest.mark.asyncio
async def test_prompts_tools_and_hooks_of_another_pack_are_private(sa_runtime_factory) -> None:
    for bad, hooks in (
        (["approve"], ()),
        (["front_main"], ()),
        (["desk/front_main"], ()),
        ([], ("desk_trim",)),
    ):
        with pytest.raises(PackValidationError) as caught:
            async with sa_runtime_factory(packs=[client_pack(bad, hooks), desk_pack()]):
                pass
        assert "prompt 'main'" in str(caught.value)


@pytest.mark.asyncio
async def test_package_agent_works_as_a_handoff_target(sa_runtime_factory) -> None:
    provider = routed(
        client=[{"tool_calls": [{"name": "front", "arguments": {}}]}],
        desk=["The desk here.", "Still the desk."],
    )
    async with sa_runtime_factory(
        packs=[client_pack(["desk/front"]), desk_pack()], providers={"test": provider}
    ) as runtime:
        thread = await runtime.create_thread("assistant")
        await thread.send_message("I need the desk")
        assert (thread.agent_id, thread.package) == ("front", "desk")
        await thread.send_message("thanks")
        page = await thread.get_messages()
    assert [t.name for t in provider.seen["client"][0].tools] == ["front"]
    assert page.messages[2].content == "Handoff complete"
    assert page.messages[-1].content == "Still the desk."
    assert provider.seen["desk"][0].messages[0].content == "Desk front."


@pytest.mark.asyncio
async def test_package_agent_works_as_a_subagent_running_in_its_own_package(
    sa_runtime_factory,
) -> None:
    entry = {"name": "desk/researcher", "blocking": True, "initUserMessageProperty": "summary"}
    provider = routed(
        client=[
            {"tool_calls": [{"name": "researcher", "arguments": {"summary": "find x"}}]},
            "Got it.",
        ],
        desk=[
            {"tool_calls": [{"name": "lookup", "arguments": {}}]},
            "Found x in the desk data.",
            {"tool_calls": [{"name": "approve", "arguments": {"summary": "x is 42"}}]},
        ],
    )
    async with sa_runtime_factory(
        packs=[client_pack([entry]), desk_pack()], providers={"test": provider}
    ) as runtime:
        parent = await runtime.create_thread("assistant")
        await parent.send_message("research x")
        await parent.refresh()
        page = await parent.get_messages()
        assert [t.name for t in provider.seen["client"][0].tools] == ["researcher"]
        assert page.messages[2].content.startswith("x is 42"), page.messages[2].content
        child = await parent.get_child_thread(parent.children[0].reference)
        child_page = await child.get_messages()
    assert page.messages[-1].content == "Got it."
    assert child.package == "desk" and child.agent_id == "researcher"
    assert "desk data" in [m.content for m in child_page.messages]


@pytest.mark.asyncio
async def test_non_entry_agents_are_not_reachable_by_bare_name_and_the_error_reads_well(tmp_path) -> None:
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.errors import DefinitionNotFoundError

    prompt = define_prompt(name="p", model="m", prompt="x")
    pack = Pack(
        name="content",
        agents=[define_agent(name="lead", side_a={"prompt": "p"}), define_agent(name="writer", side_a={"prompt": "p"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="x")],
        entry_agents=["lead"],
    )
    async with Runtime(packs=[pack], database_url=f"sqlite:///{tmp_path}/i.db", load_entrypoints=False) as rt:
        with pytest.raises(DefinitionNotFoundError) as bare:
            await rt.create_thread("writer")
        with pytest.raises(DefinitionNotFoundError) as qualified:
            await rt.create_thread("content/writer")
        assert (await rt.create_thread("writer", package="content")).agent_id == "writer"
    assert str(qualified.value) == (
        "Unknown entry agent 'writer' in package 'content'. Only a package's entry agents are "
        "reachable from outside it. Known entry agents: lead."
    )
    assert "content/lead" in str(bare.value) and "content/writer" not in str(bare.value)
