"""The typed hook facade: precomputed implementation lists, typed calls, refused plugin mistakes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sa_core import Pack, define_agent, define_hook, define_model, define_prompt
from sa_core.engine.messages import new_message
from sa_core.errors import PluginLoadError
from sa_core.plugins import create_plugin_host
from sa_core.testing import TestProvider, TestScript
from sa_hooks import hookimpl


class Upper:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    @hookimpl
    def sa_filter_messages(self, state: Any, messages: list[Any]) -> list[Any]:
        self.log.append("upper")
        return [m.upper() for m in messages]

    @hookimpl
    async def sa_before_update_message(
        self, state: Any, message_id: str, updates: dict[str, Any]
    ) -> dict[str, Any]:
        return {**updates, "seen_by": message_id}


class Exclaim:
    @hookimpl
    async def sa_filter_messages(self, messages: list[Any]) -> list[Any]:  # a subset of args
        return [f"{m}!" for m in messages]


def _no_pack_hooks() -> Any:
    """A state double whose package defines no hooks; the builtin plugin must not look further."""

    def active_hooks(hook: str) -> list[Any]:
        raise AssertionError("the builtin plugin ran for a package without hooks")

    return SimpleNamespace(scope=SimpleNamespace(hooks={}), _active_hooks=active_hooks)


@pytest.mark.asyncio
async def test_typed_calls_chain_implementations_in_pluggy_order() -> None:
    log: list[str] = []
    host = create_plugin_host(load_entrypoints=False, plugins=[Exclaim(), Upper(log)])
    state = _no_pack_hooks()
    original = ["a", "b"]
    # Upper registered last, so pluggy calls it first; Exclaim sees its output
    assert await host.hooks.filter_messages(state, original) == ["A!", "B!"]
    assert original == ["a", "b"] and log == ["upper"]
    updates = await host.hooks.before_update_message(state, "m1", {"content": "x"})
    assert updates == {"content": "x", "seen_by": "m1"}
    order = [impl.plugin for impl in host.hooks.impls("filter_messages")]
    pluggy_order = [
        host.manager.get_name(i.plugin)
        for i in reversed(host.manager.hook.sa_filter_messages.get_hookimpls())
    ]
    assert order == pluggy_order


@pytest.mark.asyncio
async def test_implementation_lists_are_computed_when_the_host_is_built(monkeypatch) -> None:
    import pluggy

    host = create_plugin_host(load_entrypoints=False)

    def fail(self: Any) -> None:
        raise AssertionError("pluggy was asked for implementations during a call")

    monkeypatch.setattr(pluggy.HookCaller, "get_hookimpls", fail)
    state = _no_pack_hooks()
    message = new_message("t", "user", "hi")
    assert await host.hooks.filter_messages(state, [message]) == [message]
    assert await host.hooks.before_create_message(state, message) is message
    await host.hooks.after_create_message(state, message)
    assert [impl.plugin for impl in host.hooks.impls("filter_messages")] == ["sa_builtin_hooks"]


def test_wants_tells_whether_a_call_would_run_anything() -> None:
    host = create_plugin_host(load_entrypoints=False, plugins=[Upper([])])
    without = _no_pack_hooks()
    with_pack_hooks = SimpleNamespace(scope=SimpleNamespace(hooks={"h": object()}))
    assert host.hooks.wants("filter_messages", without)  # a plugin implements it
    assert not host.hooks.wants("before_create_message", without)  # only the builtin one
    assert host.hooks.wants("before_create_message", with_pack_hooks)  # ... for pack hooks
    # the same answers for a caller that knows only whether the package has hooks
    assert host.hooks.wants_for("filter_messages", pack_has_hooks=False)
    assert not host.hooks.wants_for("before_create_message", pack_has_hooks=False)
    assert host.hooks.wants_for("before_create_message", pack_has_hooks=True)


@pytest.mark.asyncio
async def test_pack_hooks_still_run_through_the_builtin_plugin(sa_runtime_factory) -> None:
    def shout(state: Any, message: Any) -> Any:
        return message.model_copy(update={"content": (message.content or "").upper()})

    pack = Pack(
        name="loud",
        agents=[define_agent(name="helper", side_a={"prompt": "main"}, hooks=["shout"])],
        prompts=[define_prompt(name="main", model="m", prompt="Hi.")],
        models=[define_model(name="m", provider="test", model="m")],
        hooks=[define_hook(id="shout", hook="before_create_message", execute=shout)],
    )
    provider = TestProvider(TestScript().add_text_response("quiet reply"))
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hello")
        page = await thread.get_messages()
    assert [m.content for m in page.messages] == [
        "HELLO",
        "quiet reply",
    ]  # replies arrive as updates


@pytest.mark.asyncio
async def test_a_hook_outside_a_turn_gets_the_thread_object_the_caller_holds(
    sa_runtime_factory,
) -> None:
    seen: list[Any] = []
    pack = Pack(
        name="watch",
        agents=[define_agent(name="helper", side_a={"prompt": "main"}, hooks=["watch"])],
        prompts=[define_prompt(name="main", model="m", prompt="Hi.")],
        models=[define_model(name="m", provider="test", model="m")],
        hooks=[define_hook(id="watch", hook="after_create_message", execute=lambda s, m: seen.append(s))],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider()}) as rt:
        thread = await rt.create_thread("helper")
        await thread.inject_message({"role": "user", "content": "a note"})
        reopened = await rt.get_thread(thread.thread_id)
        await reopened.inject_message({"role": "user", "content": "another"})
    assert seen[0] is thread and seen[1] is reopened  # not a copy built for the hook


@pytest.mark.parametrize("option", ["wrapper", "hookwrapper"])
def test_a_wrapper_on_a_chained_hook_is_refused_naming_plugin_and_hook(option: str) -> None:
    class Wrapping:
        @hookimpl(**{option: True})
        def sa_before_create_message(self, state: Any, message: Any) -> Any:
            result = yield
            return result

    with pytest.raises(PluginLoadError) as caught:
        create_plugin_host(load_entrypoints=False, plugins=[Wrapping()])
    text = str(caught.value)
    assert "implements hook 'sa_before_create_message' as a wrapper" in text
    assert f"({option}=True)" in text and "Plugin '" in text


def test_a_misspelt_hook_is_an_error_with_a_did_you_mean() -> None:
    class Typo:
        @hookimpl
        def sa_filter_mesages(self, state: Any, messages: list[Any]) -> None:
            return None

    with pytest.raises(PluginLoadError, match="defines 'sa_filter_mesages', which matches no"):
        create_plugin_host(load_entrypoints=False, plugins=[Typo()])
    with pytest.raises(PluginLoadError, match="Did you mean 'sa_filter_messages'"):
        create_plugin_host(load_entrypoints=False, plugins=[Typo()])


def test_an_unmarked_misspelt_hook_is_caught_too() -> None:
    class Unmarked:
        def sa_register_tool(self, register: Any) -> None:  # no @hookimpl, and singular
            return None

    with pytest.raises(PluginLoadError, match="Did you mean 'sa_register_tools'"):
        create_plugin_host(load_entrypoints=False, plugins=[Unmarked()])


@pytest.mark.asyncio
async def test_a_runtime_with_a_misspelt_plugin_refuses_to_start(sa_runtime_factory) -> None:
    class Typo:
        @hookimpl
        def sa_after_tool_call_sucess(self, state: Any, tool_call: Any, result: Any) -> None:
            return None

    with pytest.raises(PluginLoadError, match="Did you mean 'sa_after_tool_call_success'"):
        async with sa_runtime_factory(plugins=[Typo()]):
            pass


def test_names_without_the_prefix_and_plain_attributes_are_left_alone() -> None:
    class Fine:
        sa_version = "1.0"  # not a routine

        def helper(self) -> None:
            return None

    create_plugin_host(load_entrypoints=False, plugins=[Fine()])
