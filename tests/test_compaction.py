"""Compaction of long histories (issue 36), through the public API with scripted models.

A scripted provider answers summarizer calls (recognised by their system prompt) with a fixed
summary and every other call with a padded answer, so the token estimates, and with them the
points where compaction triggers, are exact.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_hook, define_model, define_prompt, define_tool
from sa_core.engine.model.compaction import MARKER, estimate_request_tokens, is_marker
from sa_core.engine.model.compaction_summary import SUMMARY_INSTRUCTIONS, SUMMARY_PREFIX
from sa_core.testing import FunctionProvider

PAD = "x" * 396  # with "u1: " or "a1: " a message is 400 characters: 100 estimated tokens


def is_summary_call(request) -> bool:
    return request.messages[0].content == SUMMARY_INSTRUCTIONS


def main_requests(provider) -> list:
    return [r for r in provider.requests if not is_summary_call(r)]


def summary_requests(provider) -> list:
    return [r for r in provider.requests if is_summary_call(r)]


def chat_provider() -> FunctionProvider:
    def answer(request):
        if is_summary_call(request):
            return f"SUMMARY#{len(summary_requests(provider))}"
        turn = request.messages[-1].content.split(":")[0][1:]  # "u4: ..." is answered "a4: ..."
        return f"a{turn}: {PAD}"

    provider = FunctionProvider(answer)
    return provider


def chat_pack(compaction=None, *, window=None, hooks=(), prompt_hooks=()) -> Pack:
    model = define_model(name="m", provider="test", model="m", max_context_tokens=window)
    prompt = define_prompt(
        name="main",
        model="m",
        prompt="You help.",
        include_chat=True,
        compaction=compaction,
        hooks=list(prompt_hooks),
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    return Pack(name="demo", agents=[agent], prompts=[prompt], models=[model], hooks=list(hooks))


async def chat(runtime, turns: int):
    thread = await runtime.create_thread("helper")
    for n in range(1, turns + 1):
        await thread.send_message(f"u{n}: {PAD}")
    return thread


async def all_messages(thread) -> list:
    return (await thread.get_messages(limit=1000, include_silent=True)).messages


@pytest.mark.asyncio
async def test_summary_marker_is_stored_once_and_the_next_request_is_marker_plus_tail(
    sa_runtime_factory,
):
    provider = chat_provider()
    pack = chat_pack({"trigger_tokens": 510, "keep_last": 4})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await chat(runtime, 4)  # the 4th request would be 700 tokens
        stored = await all_messages(thread)
        logs = await thread.get_logs()
        usage = await thread.usage()
    markers = [m for m in stored if is_marker(m)]
    assert len(markers) == 1
    marker = markers[0]
    assert marker.role == "system" and marker.content == f"{SUMMARY_PREFIX}SUMMARY#1"
    info = marker.metadata[MARKER]
    assert info["strategy"] == "summarize" and info["messages"] == 3 and info["model"] == "m"
    # every original message is still stored and listed, the marker after them
    chat_rows = [m for m in stored if not is_marker(m)]
    assert [m.content[:3] for m in chat_rows] == [
        "u1:", "a1:", "u2:", "a2:", "u3:", "a3:", "u4:", "a4:",
    ]  # fmt: skip
    assert info["through_id"] == chat_rows[2].id
    # the summarizer read the compacted messages
    (summary_call,) = summary_requests(provider)
    assert "user: u1:" in summary_call.messages[1].content
    assert "assistant: a1:" in summary_call.messages[1].content
    assert "u3:" not in summary_call.messages[1].content
    # the request after it: system prompt, marker, then the four newest messages
    last = main_requests(provider)[-1]
    assert [m.role for m in last.messages] == ["system", "system", "assistant", "user", "assistant", "user"]  # fmt: skip
    assert last.messages[1].content == marker.content
    tail = [m.content[:3] for m in last.messages[2:]]
    assert tail == ["a2:", "u3:", "a3:", "u4:"]
    # the summarizer call is logged with the marker and counted in the usage
    compaction_logs = [log for log in logs if log.data.get("purpose") == "compaction"]
    assert [log.id for log in compaction_logs] == [marker.log_id]
    assert compaction_logs[0].data["message_id"] == marker.id
    assert usage.thread.model_calls == 5


@pytest.mark.asyncio
async def test_a_later_compaction_folds_the_previous_summary_in(sa_runtime_factory):
    provider = chat_provider()
    pack = chat_pack({"trigger_tokens": 510, "keep_last": 4})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await chat(runtime, 6)
        stored = await all_messages(thread)
    markers = [m for m in stored if is_marker(m)]
    assert len(markers) == len(summary_requests(provider)) >= 2
    second = summary_requests(provider)[1].messages[1].content
    assert second.startswith("Summary so far:\nSUMMARY#1")
    last = main_requests(provider)[-1]
    assert last.messages[1].content == markers[-1].content
    assert all(not m.content.startswith(SUMMARY_PREFIX) for m in last.messages[2:])
    assert sum(1 for m in stored if not is_marker(m)) == 12  # nothing lost


class Query(BaseModel):
    query: str


class Done(BaseModel):
    summary: str


def fetch_tool():
    return define_tool(
        name="fetch", description="Fetch a page.", args=Query,
        execute=lambda state, args: f"page {args.query}: " + "y" * 800,
    )  # fmt: skip


def looping(calls: int, *, final: dict | str = "done"):
    """A model that calls fetch ``calls`` times (one per step), then answers ``final``."""

    def answer(request):
        if is_summary_call(request):
            return "FETCHED PAGES 1-2"
        done = sum(1 for m in request.messages if m.role == "tool")
        summary = any((m.content or "").startswith(SUMMARY_PREFIX) for m in request.messages)
        fetched = done + (2 if summary else 0)
        if fetched < calls:
            return {"tool_calls": [{"name": "fetch", "arguments": {"query": f"q{fetched + 1}"}}]}
        return final

    return answer


@pytest.mark.asyncio
async def test_drop_tool_results_stubs_old_results_and_keeps_new_ones(sa_runtime_factory):
    state = {"calls": 0}

    def answer(request):
        tools = [m for m in request.messages if m.role == "tool"]
        if len(tools) < 4:
            return {"tool_calls": [{"name": "fetch", "arguments": {"query": f"q{len(tools) + 1}"}}]}
        state["calls"] += 1
        return "done"

    provider = FunctionProvider(answer)
    model = define_model(name="m", provider="test", model="m")
    prompt = define_prompt(
        name="main", model="m", prompt="You fetch.", include_chat=True, tools=["fetch"],
        compaction={"trigger_tokens": 500, "keep_last": 2, "strategy": "drop_tool_results"},
    )  # fmt: skip
    pack = Pack(
        name="demo", agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[prompt], models=[model], tools=[fetch_tool()],
    )  # fmt: skip
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("fetch four pages")
        stored = await all_messages(thread)
    assert not summary_requests(provider)
    markers = [m for m in stored if is_marker(m)]
    assert markers and all(m.metadata[MARKER]["strategy"] == "drop_tool_results" for m in markers)
    last = provider.requests[-1]
    results = [m.content for m in last.messages if m.role == "tool"]
    assert len(results) == 4
    assert results[0].startswith("[Result of fetch removed to save context (")
    assert results[-1].startswith("page q4: yyy")  # the newest result is kept whole
    assert not any(m.content and m.content.startswith("Results of earlier") for m in last.messages)
    # the stored tool messages keep their full results
    stored_results = [m.content for m in stored if m.role == "tool"]
    assert len(stored_results) == 4 and all(r.endswith("y" * 800) for r in stored_results)


@pytest.mark.asyncio
async def test_a_child_thread_compacts_its_own_history(sa_runtime_factory):
    child_model = define_model(name="cm", provider="test", model="child")
    parent_model = define_model(name="pm", provider="test", model="parent")
    worker = define_prompt(
        name="worker", model="cm", prompt="Research.", include_chat=True, tools=["fetch", "done"],
        compaction={"trigger_tokens": 600, "keep_last": 2},
    )  # fmt: skip
    reviewer = define_prompt(name="reviewer", model="cm", prompt="Review.", include_chat=True)
    lead = define_prompt(
        name="lead", model="pm", prompt="Lead.", include_chat=True,
        tools=[{"name": "researcher", "blocking": True, "initUserMessageProperty": "query"}],
    )  # fmt: skip
    researcher = define_agent(
        name="researcher", type="dual_ai", expose_as_tool=True, tool_description="Researches.",
        side_a={
            "prompt": "worker", "session_stop": {"name": "done", "message_property": "summary"},
        },
        side_b={"prompt": "reviewer"},
    )  # fmt: skip
    done = define_tool(name="done", description="Finish.", args=Done, execute=lambda s, a: "ok")
    pack = Pack(
        name="demo",
        agents=[define_agent(name="lead", side_a={"prompt": "lead"}), researcher],
        prompts=[worker, reviewer, lead], models=[child_model, parent_model],
        tools=[fetch_tool(), done],
    )  # fmt: skip
    child_answer = looping(
        4, final={"tool_calls": [{"name": "done", "arguments": {"summary": "found it"}}]}
    )
    parent_script = iter([
        {"tool_calls": [{"name": "researcher", "arguments": {"query": "topic"}}]}, "All done.",
    ])  # fmt: skip

    def answer(request):
        return child_answer(request) if request.model == "child" else next(parent_script)

    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        parent = await runtime.create_thread("lead")
        await parent.send_message("research the topic")
        await parent.refresh()
        child = await parent.get_child_thread(parent.children[0].reference)
        child_rows = await all_messages(child)
        parent_rows = await all_messages(parent)
    markers = [m for m in child_rows if is_marker(m)]
    assert len(markers) == 1 and markers[0].content == f"{SUMMARY_PREFIX}FETCHED PAGES 1-2"
    assert not any(is_marker(m) for m in parent_rows)
    assert sum(1 for m in child_rows if m.role == "tool") == 5  # four fetches and done, all kept
    after = [r for r in provider.requests if r.model == "child" and not is_summary_call(r)][-1]
    assert after.messages[1].content == markers[0].content
    assert parent_rows[-1].content == "All done."


@pytest.mark.asyncio
async def test_filter_messages_and_prefilter_hooks_see_the_compacted_history(sa_runtime_factory):
    filtered: list[list] = []
    prefiltered: list[list] = []

    def on_filter(state, messages):
        filtered.append(list(messages))
        return messages

    def on_prefilter(state, messages):
        prefiltered.append(list(messages))
        return messages

    hooks = [
        define_hook(id="f", hook="filter_messages", execute=on_filter),
        define_hook(id="p", hook="prefilter_llm_history", execute=on_prefilter),
    ]
    provider = chat_provider()
    pack = chat_pack({"trigger_tokens": 510, "keep_last": 4}, hooks=hooks, prompt_hooks=["f", "p"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        await chat(runtime, 4)
    seen = filtered[-1]
    assert is_marker(seen[0]) and seen[0].metadata[MARKER]["strategy"] == "summarize"
    assert [m.content[:3] for m in seen[1:]] == ["a2:", "u3:", "a3:", "u4:"]
    assert prefiltered[-1][1].role == "system"
    assert prefiltered[-1][1].content.startswith(SUMMARY_PREFIX)
    assert len(prefiltered[-1]) == 6


@pytest.mark.asyncio
async def test_the_context_window_is_a_ceiling_without_declared_compaction(sa_runtime_factory):
    provider = chat_provider()
    pack = chat_pack(window=600)  # compacts at 85 % of 600 tokens: 510
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await chat(runtime, 8)
        stored = await all_messages(thread)
    assert summary_requests(provider)
    assert all(estimate_request_tokens(r.messages, r.tools) <= 600 for r in provider.requests)
    # a summarizer reads at most half its window per call: a marker may take several calls
    assert 1 <= sum(1 for m in stored if is_marker(m)) <= len(summary_requests(provider))
    assert stored[-1].content.startswith("a8:")


@pytest.mark.asyncio
async def test_a_message_larger_than_the_window_is_never_sent(sa_runtime_factory):
    provider = chat_provider()
    pack = chat_pack(window=300)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("z" * 4000)
        logs = await thread.get_logs()
    assert provider.requests == []
    errors = [log.data["error"] for log in logs if log.type == "step_error"]
    assert errors and "more than model 'm' takes (300" in errors[0]


def test_compaction_config_errors_name_the_prompt_and_the_field():
    with pytest.raises(ValueError, match=r"prompt 'main': compaction.trigger_tokens"):
        define_prompt(name="main", model="m", compaction={"trigger_tokens": 0})
    with pytest.raises(ValueError, match=r"prompt 'main': compaction.strategy"):
        define_prompt(name="main", model="m", compaction={"trigger_tokens": 9, "strategy": "x"})
    with pytest.raises(ValueError, match=r"prompt 'main': compaction.keep_last"):
        define_prompt(name="main", model="m", compaction={"trigger_tokens": 9, "keep_last": 0})


def test_an_unknown_summarizer_model_fails_pack_validation():
    from sa_core.spec.validation import validate_pack

    pack = chat_pack({"trigger_tokens": 500, "model": "nope"})
    problems = validate_pack(pack)
    assert any("compaction.model 'nope'" in p for p in problems)
