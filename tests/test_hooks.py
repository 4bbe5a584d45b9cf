"""Hooks: pack-defined hooks chained per prompt/agent, global plugins, pluggy call order."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sa_core import Pack, define_agent, define_hook, define_model, define_prompt, define_tool
from sa_core.plugins import create_plugin_host, iter_hook_names
from sa_core.testing import TestProvider, TestScript
from sa_hooks import hookimpl, specs

MODEL = define_model(name="fast", provider="test", model="m")


def hook_pack(prompt_hooks=(), agent_hooks=(), hooks=(), tools=()):
    prompt = define_prompt(name="main", model="fast", prompt="P.", include_chat=True, hooks=list(prompt_hooks), tools=[t.name for t in tools])
    agent = define_agent(name="helper", side_a={"prompt": "main"}, hooks=list(agent_hooks))
    return Pack(name="h", agents=[agent], prompts=[prompt], models=[MODEL], hooks=list(hooks), tools=list(tools))


@pytest.mark.asyncio
async def test_prompt_hooks_chain_in_list_order(sa_runtime_factory):
    def first(state, messages):
        return [m.model_copy(update={"content": (m.content or "") + " +first"}) for m in messages]

    async def second(state, messages):
        return [m.model_copy(update={"content": (m.content or "") + " +second"}) for m in messages]

    hooks = [define_hook(id="one", hook="filter_messages", execute=first), define_hook(id="two", hook="filter_messages", execute=second)]
    provider = TestProvider(TestScript().add_text_response("x"))
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["two", "one"], hooks=hooks)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hi")
        stored = (await thread.get_messages()).messages[0].content
    assert provider.last_request.messages[1].content == "hi +second +first"
    assert stored == "hi"  # filter_messages edits the context, not the store


@pytest.mark.asyncio
async def test_agent_hooks_apply_when_the_prompt_lists_none(sa_runtime_factory):
    seen = []
    hooks = [define_hook(id="spy", hook="after_create_message", execute=lambda state, m: seen.append(m.role))]
    async with sa_runtime_factory(packs=[hook_pack(agent_hooks=["spy"], hooks=hooks)], providers={"test": TestProvider(TestScript().add_text_response("x"))}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hi")
    assert seen[:2] == ["user", "assistant"]


@pytest.mark.asyncio
async def test_before_create_message_transforms_what_is_stored(sa_runtime_factory):
    def redact(state, message):
        return message.model_copy(update={"content": (message.content or "").replace("4111", "****")})

    hooks = [define_hook(id="redact", hook="before_create_message", execute=redact)]
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["redact"], hooks=hooks)], providers={"test": TestProvider(TestScript().add_text_response("card 4111"))}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("my card is 4111")
        page = await thread.get_messages()
    assert page.messages[0].content == "my card is ****"


@pytest.mark.asyncio
async def test_tool_result_hooks(sa_runtime_factory):
    tool = define_tool(name="flaky", description="x", execute=lambda state: (_ for _ in ()).throw(RuntimeError("nope")))
    good = define_tool(name="good", description="x", execute=lambda state: "raw")
    hooks = [
        define_hook(id="recover", hook="after_tool_call_failure", execute=lambda state, call, result: {"status": "success", "result": f"recovered from {result.error}"}),
        define_hook(id="stamp", hook="before_store_tool_result", execute=lambda state, call, result: result.model_copy(update={"result": (result.result or "") + " [checked]"})),
        define_hook(id="upper", hook="after_tool_call_success", execute=lambda state, call, result: result.model_copy(update={"result": (result.result or "").upper()})),
    ]
    script = TestScript().add_tool_call_response([{"name": "flaky", "arguments": {}}, {"name": "good", "arguments": {}}]).add_text_response("ok")
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["recover", "stamp", "upper"], hooks=hooks, tools=[tool, good])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        rows = [m for m in (await thread.get_messages()).messages if m.role == "tool"]
    assert rows[0].content == "recovered from nope [checked]" and rows[0].tool_status == "success"
    assert rows[1].content == "RAW [checked]"


@pytest.mark.asyncio
async def test_update_hooks_and_prefilter_history(sa_runtime_factory):
    updates_seen = []

    def before_update(state, message_id, updates):
        updates_seen.append(updates.get("status"))
        return {**updates, "metadata": {"reviewed": True}}

    def prefilter(state, messages):
        return [m for m in messages if m.role != "system"] + []

    hooks = [define_hook(id="bu", hook="before_update_message", execute=before_update), define_hook(id="pf", hook="prefilter_llm_history", execute=prefilter)]
    provider = TestProvider(TestScript().add_text_response("x"))
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["bu", "pf"], hooks=hooks)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hi")
        page = await thread.get_messages()
    assert updates_seen == ["completed"] and page.messages[1].metadata == {"reviewed": True}
    assert [m.role for m in provider.last_request.messages] == ["user"]


class GlobalRedactor:
    """A global plugin: sees every thread."""

    def __init__(self):
        self.calls = 0

    @hookimpl
    def sa_before_create_message(self, state, message):
        self.calls += 1
        return message.model_copy(update={"content": (message.content or "").replace("secret", "[redacted]")})

    @hookimpl
    def sa_before_update_message(self, state, message_id, updates):
        if updates.get("content"):
            return {**updates, "content": updates["content"].replace("secret", "[redacted]")}
        return None


@pytest.mark.asyncio
async def test_global_plugin_hooks_run_for_every_thread(sa_runtime_factory):
    plugin = GlobalRedactor()
    async with sa_runtime_factory(packs=[hook_pack()], providers={"test": TestProvider(TestScript().add_text_response("no secret here"))}, plugins=[plugin]) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("my secret")
        page = await thread.get_messages()
    assert [m.content for m in page.messages] == ["my [redacted]", "no [redacted] here"]
    assert plugin.calls >= 2


class Tagger:
    def __init__(self, tag, log):
        self.tag, self.log = tag, log

    @hookimpl
    async def sa_filter_messages(self, state, messages):
        self.log.append(self.tag)
        return messages


@pytest.mark.asyncio
async def test_async_hookimpls_are_awaited_in_pluggy_call_order():
    log = []
    first, second = Tagger("first-registered", log), Tagger("second-registered", log)
    host = create_plugin_host(load_entrypoints=False, plugins=[first, second])
    expected = [impl.plugin for impl in reversed(host.manager.hook.sa_filter_messages.get_hookimpls())]

    class FakeState:  # no pack hooks: the prompt and the agent list none
        scope = SimpleNamespace(hooks={})
        active_prompt = None
        agent = SimpleNamespace(hooks=[])

    result = await host.chain("filter_messages", ["m"], state=FakeState())
    assert result == ["m"]
    assert log == [p.tag for p in expected if isinstance(p, Tagger)] == ["second-registered", "first-registered"]


def test_every_hook_spec_is_documented_and_named_with_the_prefix():
    names = list(iter_hook_names())
    assert len(names) == 14
    for name in names:
        assert name.startswith("sa_")
        doc = getattr(specs, name).__doc__
        assert doc and len(doc.strip()) > 20, name
    assert {n[3:] for n in names} >= set(specs.LIFECYCLE_HOOKS)


def test_duplicate_provider_registration_names_both_plugins():
    from sa_core.errors import DuplicateNameError

    class P:
        name = "dup"

    class One:
        @hookimpl
        def sa_register_providers(self, register):
            register(P())

    class Two:
        @hookimpl
        def sa_register_providers(self, register):
            register(P())

    with pytest.raises(DuplicateNameError, match="registered by both"):
        create_plugin_host(load_entrypoints=False, plugins=[One(), Two()])


def test_first_party_entry_points_load():
    host = create_plugin_host(load_entrypoints=True)
    assert {"openai", "anthropic", "google"} <= set(host.providers)


def test_public_api_all_is_sorted_and_importable():
    import sa_core

    assert sa_core.__all__ == sorted(sa_core.__all__)
    for name in sa_core.__all__:
        assert getattr(sa_core, name) is not None


def test_pack_hook_names_match_the_hook_specs():
    from typing import get_args

    from sa_core.spec import HookName

    assert get_args(HookName) == specs.LIFECYCLE_HOOKS


def test_public_api_all_lists_exactly_the_lazy_exports():
    import sa_core

    assert sa_core.__all__ == sorted(sa_core._EXPORTS)


@pytest.mark.asyncio
async def test_filter_messages_edits_reach_every_step_of_a_turn(sa_runtime_factory):
    # A compaction-style hook rewrites an already-seen message on a later step of the same turn.
    def compact(state, messages):
        if len(messages) > 1:
            return [m.model_copy(update={"content": "[compacted]"}) if m.role == "user" else m for m in messages]
        return None

    tool = define_tool(name="tick", description="x", execute=lambda state: "ticked")
    hooks = [define_hook(id="compact", hook="filter_messages", execute=compact)]
    script = TestScript().add_tool_call_response([{"name": "tick", "arguments": {}}]).add_text_response("done")
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["compact"], hooks=hooks, tools=[tool])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("a very long message")
    assert provider.requests[0].messages[1].content == "a very long message"
    assert [m.content for m in provider.requests[1].messages if m.role == "user"] == ["[compacted]"]


@pytest.mark.asyncio
async def test_a_raising_observer_hook_is_logged_and_the_turn_goes_on(sa_runtime_factory):
    def fragile(state, message):
        if message.role == "tool":
            raise RuntimeError("audit sink down")

    tool = define_tool(name="tick", description="x", execute=lambda state: "ticked")
    hooks = [define_hook(id="audit", hook="after_create_message", execute=fragile)]
    script = TestScript().add_tool_call_response([{"name": "tick", "arguments": {}}]).add_text_response("done")
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["audit"], hooks=hooks, tools=[tool])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        page = await thread.get_messages()
        logs = await thread.get_logs()
    assert [(m.role, m.content) for m in page.messages] == [("user", "go"), ("assistant", None), ("tool", "ticked"), ("assistant", "done")]
    errors = [log.data for log in logs if log.type == "hook_error"]
    assert len(errors) == 1 and errors[0]["hook"] == "after_create_message" and "audit sink down" in errors[0]["error"]


@pytest.mark.asyncio
async def test_a_hook_that_also_fails_the_step_error_record_still_settles_the_thread(sa_runtime_factory):
    def refuse_tool_rows(state, message):
        if message.role == "tool":
            raise RuntimeError("no tool rows today")
        return None

    tool = define_tool(name="tick", description="x", execute=lambda state: "ticked")
    hooks = [define_hook(id="refuse", hook="before_create_message", execute=refuse_tool_rows)]
    script = TestScript().add_tool_call_response([{"name": "tick", "arguments": {}}]).add_text_response("recovered")
    async with sa_runtime_factory(packs=[hook_pack(prompt_hooks=["refuse"], hooks=hooks, tools=[tool])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")  # does not raise: the step error is recorded
        await thread.refresh()
        assert thread.row.execution["last_stop_reason"] == "step_error"
        logs = await thread.get_logs()
        step_errors = [log.data for log in logs if log.type == "step_error"]
        assert len(step_errors) == 1 and "no tool rows today" in step_errors[0]["recording_error"]
        await thread.send_message("again")
        page = await thread.get_messages()
    assert page.messages[-1].content == "recovered"
