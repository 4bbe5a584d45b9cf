"""Composition rules around env: scoped-variable bootstrap, immediate subagents, propagation."""

from __future__ import annotations

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

MODEL = define_model(name="m", provider="test", model="any")


def pack_with(entry, *, child_variables=(), worker_prompt="Work."):
    approve = define_tool(name="approve", description="Approve.", execute=lambda state: "approved")
    use_key = define_tool(name="use_key", description="Use.", execute=lambda state: f"key={state.env('SERVICE_KEY')}",
                          variables=list(child_variables))
    coordinator = define_prompt(name="coordinator", model="m", prompt="Coordinate.", include_chat=True, tools=[entry])
    worker = define_prompt(name="worker", model="m", prompt=worker_prompt, include_chat=True, tools=["use_key"])
    reviewer = define_prompt(name="reviewer", model="m", prompt="Review.", include_chat=True, tools=["approve"])
    child = define_agent(
        name="child", type="dual_ai", expose_as_tool=True, tool_description="Does work.", max_session_turns=3,
        side_a={"prompt": "worker"}, side_b={"prompt": "reviewer", "stop_on_response": False, "session_stop": "approve"},
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"})
    return Pack(name="vars", agents=[lead, child], prompts=[coordinator, worker, reviewer], models=[MODEL], tools=[approve, use_key])


def by_prompt(**answers):
    calls = {k: list(v) for k, v in answers.items()}

    def answer(request):
        key = request.messages[0].content
        queue = calls.get(key) or []
        return queue.pop(0) if queue else "fine"

    return FunctionProvider(answer)


SCOPED_KEY = [{"name": "SERVICE_KEY", "type": "secret", "required": True, "scoped": True}]
CREATE = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "child", "name": "svc", "message": "use the key", "attachments": []}}]}
RESUMABLE_BLOCKING = {"name": "child", "blocking": True, "resumable": {"receives_messages": "side_a"}}


@pytest.mark.asyncio
async def test_missing_scoped_variables_defer_the_child_until_provided(sa_runtime_factory):
    pack = pack_with({"name": "child", "blocking": False, "resumable": {"receives_messages": "side_a"}}, child_variables=SCOPED_KEY)
    provider = by_prompt(**{
        "Coordinate.": [CREATE, "waiting for the key"],
        "Work.": [{"tool_calls": [{"name": "use_key", "arguments": {}}]}, "used it"],
        "Review.": [{"tool_calls": [{"name": "approve", "arguments": {}}]}],
    })
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        # the parent does not need the scoped variable
        parent = await rt.create_thread("lead", env={"SERVICE_KEY": "parent-value-is-not-inherited"})
        await parent.send_message("start")
        page = await parent.get_messages()
        row = page.messages[2]
        assert row.tool_status == "error"
        data = row.metadata["error_data"]
        assert row.metadata["error_code"] == "subagent_env_required"
        assert data["missing"] == ["SERVICE_KEY"] and data["agent"] == "child"
        assert data["endpoint"] == f"/api/packages/vars/threads/{parent.thread_id}/variables/{data['request_id']}"
        request = await parent.variables_request(data["request_id"])
        assert request["missing"] == ["SERVICE_KEY"] and "parent-value" not in str(request)
        booted = await rt.provide_variables(parent.thread_id, data["request_id"], {"SERVICE_KEY": "child-secret"})
        assert booted["status"] == "success"
        await rt.wait_idle(timeout=60)
        child = await rt.get_thread(booted["child_thread_id"])
        assert child.env("SERVICE_KEY") == "child-secret"
        tool_rows = [m for m in (await child.get_messages()).messages if m.name == "use_key"]
        assert tool_rows[0].content == "key=[redacted]"  # the tool read it; the model never sees it
        assert await parent.variables_request(data["request_id"]) is None
        # the secret value never reached any model
        assert not any("child-secret" in repr(r.messages) for r in provider.requests)


@pytest.mark.asyncio
async def test_scoped_variables_are_not_inherited_but_others_are(sa_runtime_factory):
    pack = pack_with({"name": "child", "blocking": True}, child_variables=[{"name": "SERVICE_KEY", "required": False, "scoped": True}])
    async with sa_runtime_factory(packs=[pack], providers={"test": by_prompt(**{"Coordinate.": [{"tool_calls": [{"name": "child", "arguments": {"message": "go"}}]}]})}) as rt:
        parent = await rt.create_thread("lead", env={"SERVICE_KEY": "parent", "REGION": "eu"})
        await parent.send_message("start")
        await parent.refresh()
        child = await parent.get_child_thread(parent.children[0].reference)
        assert child.env_or_none("SERVICE_KEY") is None
        assert child.env("REGION") == "eu"


@pytest.mark.asyncio
async def test_set_env_on_a_parent_reaches_active_descendants(sa_runtime_factory):
    # a resumable child: a non-resumable one is terminated once it has reported
    pack = pack_with(RESUMABLE_BLOCKING)
    async with sa_runtime_factory(packs=[pack], providers={"test": by_prompt(**{"Coordinate.": [CREATE]})}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("start")
        await parent.refresh()
        reference = parent.children[0].reference
        await parent.set_env("MODE", "strict")
        child = await rt.get_thread(reference)
        assert child.env("MODE") == "strict"


@pytest.mark.asyncio
async def test_immediate_subagent_is_created_with_the_thread(sa_runtime_factory):
    entry = {"name": "child", "blocking": False, "immediate": True, "resumable": {"receives_messages": "side_a", "maxInstances": 2}}
    pack = pack_with(entry)
    provider = by_prompt(**{"Review.": [{"tool_calls": [{"name": "approve", "arguments": {}}]}]})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        assert len(parent.children) == 1
        await rt.wait_idle(timeout=60)
        await parent.refresh()
    assert parent.children[0].name == "child"
    # the child ran before the parent ever took a step; the parent woke only for its report
    assert provider.requests[0].messages[0].content == "Work."
    first_parent = next(r for r in provider.requests if r.messages[0].content == "Coordinate.")
    assert "has returned the following result" in first_parent.messages[-1].content


@pytest.mark.asyncio
async def test_immediate_subagent_on_side_b_of_a_dual_ai_agent_is_created_with_the_thread(sa_runtime_factory):
    # both sides' prompts become active with the thread: side B's immediate entries start too
    entry = {"name": "child", "blocking": False, "immediate": True, "resumable": {"receives_messages": "side_a"}}
    base = pack_with(entry)
    front = define_prompt(name="front", model="m", prompt="Front.", include_chat=True)
    desk = define_agent(name="desk", type="dual_ai", max_session_turns=2, side_a={"prompt": "front"}, side_b={"prompt": "coordinator"})
    pack = Pack(name="vars", agents=[*base.agents, desk], prompts=[*base.prompts, front], models=base.models, tools=base.tools)
    provider = by_prompt(**{"Review.": [{"tool_calls": [{"name": "approve", "arguments": {}}]}]})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("desk")
        assert [e.name for e in parent.children] == ["child"]
        await rt.wait_idle(timeout=10)
        await parent.refresh()
        child = await rt.get_thread(parent.children[0].reference)
        page = await parent.get_messages(include_silent=True)
    assert child.row.properties["owner_side"] == "b" and child.row.properties["prompt"] == "coordinator"
    # the child worked before the parent took a step; its report woke side B, which owns it
    assert provider.requests[0].messages[0].content == "Work."
    notification = next(m for m in page.messages if (m.metadata or {}).get("subagent_id") == child.thread_id)
    assert notification.role == "assistant" and "has returned the following result" in notification.content
    first_parent = next(r for r in provider.requests if r.messages[0].content in ("Front.", "Coordinate."))
    assert first_parent.messages[0].content == "Coordinate."


@pytest.mark.asyncio
async def test_immediate_object_form_fans_out_and_keeps_scoped_env_away_from_models(sa_runtime_factory):
    entry = {
        "name": "child", "blocking": False,
        "immediate": {"nameEnv": "SHOP_NAME", "scopedEnv": ["SHOP_TOKEN"]},
        "resumable": {"receives_messages": "side_a", "maxInstances": 5},
    }
    pack = pack_with(entry)
    provider = by_prompt()
    env = {"SHOP_NAME": "north", "SHOP_TOKEN": "tok-1", "SHOP_NAME__2": "south", "SHOP_TOKEN__2": "tok-2"}
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead", env=env)
        await rt.wait_idle(timeout=60)
        await parent.refresh()
        names = sorted(e.thread_name for e in parent.children)
        tokens = sorted([(await rt.get_thread(e.reference)).env("SHOP_TOKEN") for e in parent.children])
    assert names == ["north", "south"] and tokens == ["tok-1", "tok-2"]
    assert not any("tok-" in repr(r.messages) for r in provider.requests)


@pytest.mark.asyncio
async def test_set_env_on_a_parent_does_not_overwrite_a_childs_scoped_variable(sa_runtime_factory):
    pack = pack_with(RESUMABLE_BLOCKING, child_variables=[{"name": "SERVICE_KEY", "required": False, "scoped": True}])
    async with sa_runtime_factory(packs=[pack], providers={"test": by_prompt(**{"Coordinate.": [CREATE]})}) as rt:
        parent = await rt.create_thread("lead", env={"SERVICE_KEY": "parent"})
        await parent.send_message("start")
        await parent.refresh()
        reference = parent.children[0].reference
        child = await rt.get_thread(reference)
        await child.set_env("SERVICE_KEY", "child-own")
        await parent.set_env("SERVICE_KEY", "parent-rotated")
        await parent.set_env("REGION", "eu")
        assert child.env("SERVICE_KEY") == "child-own"  # the live handle
        assert child.env("REGION") == "eu"
        reopened = await rt.get_thread(reference)
    assert reopened.env("SERVICE_KEY") == "child-own"
    assert parent.env("SERVICE_KEY") == "parent-rotated"


@pytest.mark.asyncio
async def test_set_env_on_a_parent_reaches_a_running_child(sa_runtime_factory):
    import asyncio

    entered, release = asyncio.Event(), asyncio.Event()
    seen = []

    async def read_mode(state):
        entered.set()
        await release.wait()
        seen.append(state.env_or_none("MODE"))
        return "read"

    pack = pack_with({"name": "child", "blocking": False})
    use_key = next(t for t in pack.tools if t.name == "use_key")
    pack.tools[pack.tools.index(use_key)] = define_tool(name="use_key", description="Use.", execute=read_mode)
    provider = by_prompt(**{
        "Coordinate.": [{"tool_calls": [{"name": "child", "arguments": {"message": "go"}}]}, "started"],
        "Work.": [{"tool_calls": [{"name": "use_key", "arguments": {}}]}, "done"],
        "Review.": [{"tool_calls": [{"name": "approve", "arguments": {}}]}],
    })
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("start")
        await asyncio.wait_for(entered.wait(), 60)
        await parent.set_env("MODE", "strict")
        release.set()
        await rt.wait_idle(timeout=60)
    assert seen == ["strict"]


@pytest.mark.asyncio
async def test_a_deferred_child_booted_with_variables_keeps_the_side_that_asked_for_it(sa_runtime_factory):
    base = pack_with({"name": "child", "blocking": False, "resumable": {"receives_messages": "side_a"}}, child_variables=SCOPED_KEY)
    front = define_prompt(name="front", model="m", prompt="Front.", include_chat=True)
    desk = define_agent(name="desk", type="dual_ai", max_session_turns=2, side_a={"prompt": "front"}, side_b={"prompt": "coordinator"})
    pack = Pack(name="vars", agents=[*base.agents, desk], prompts=[*base.prompts, front], models=base.models, tools=base.tools)
    provider = by_prompt(**{
        "Front.": ["a draft"],
        "Coordinate.": [CREATE, "waiting for the key"],
        "Work.": [{"tool_calls": [{"name": "use_key", "arguments": {}}]}, "used it"],
        "Review.": [{"tool_calls": [{"name": "approve", "arguments": {}}]}],
    })
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("desk")
        await parent.send_message("start")
        rows = [m for m in (await parent.get_messages()).messages if m.role == "tool"]
        assert rows[0].metadata["error_code"] == "subagent_env_required"  # asked for by side B
        booted = await rt.provide_variables(parent.thread_id, rows[0].metadata["error_data"]["request_id"], {"SERVICE_KEY": "k-123456"})
        await rt.wait_idle(timeout=60)
        child = await rt.get_thread(booted["child_thread_id"])
        page = await parent.get_messages(include_silent=True)
    assert child.row.properties["owner_side"] == "b"
    notification = next(m for m in page.messages if m.metadata and m.metadata.get("subagent_id") == child.thread_id)
    assert notification.role == "assistant"  # queued for side B, which owns the child


@pytest.mark.asyncio
async def test_each_runtime_checks_the_variables_its_own_agent_declares(sa_runtime_factory):
    """Two runtimes whose packs name their agents alike: neither sees the other's variables.

    An agent graph's declared variables are walked once and remembered; this is the case a
    cache keyed by names alone would get wrong.
    """
    plain = pack_with({"name": "child", "blocking": True})
    keyed = pack_with({"name": "child", "blocking": True}, child_variables=SCOPED_KEY)
    async with sa_runtime_factory(packs=[plain], providers={"test": by_prompt()}) as rt_plain:
        async with sa_runtime_factory(packs=[keyed], providers={"test": by_prompt()}) as rt_keyed:
            for _ in range(2):  # asked again: the remembered answer is the same
                scope = rt_keyed.registry.scope("vars")
                missing = rt_keyed.missing_variables(
                    scope, scope.agents["child"], {}, None, include_scoped=True
                )
                assert [name for name, _ in missing] == ["SERVICE_KEY"]
                scope = rt_plain.registry.scope("vars")
                assert rt_plain.missing_variables(
                    scope, scope.agents["child"], {}, None, include_scoped=True
                ) == []
