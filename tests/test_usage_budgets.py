"""Usage rolled up over a subagent tree, and budgets that stop it, through the API and HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from subagent_tree import Task, research_tree

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

# $1 per million input tokens, $2 per million output tokens.
PARENT = define_model(
    name="parent_model", provider="test", model="parent", input_price=1.0, output_price=2.0
)
WORKER = define_model(
    name="worker_model", provider="test", model="worker", input_price=1.0, output_price=2.0
)


def usage(prompt: int, completion: int, reasoning: int = 0) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "reasoning_tokens": reasoning,
        "total_tokens": prompt + completion,
    }


def tree_pack(**lead_fields: Any) -> Pack:
    """The lead and its blocking ``researcher`` subagent (:func:`subagent_tree.research_tree`)."""
    return research_tree("budget", PARENT, WORKER, **lead_fields)


def provider() -> FunctionProvider:
    """Parent: delegates, then answers. Worker: calls approve. Fixed usage per call."""

    def answer(request: Any) -> Any:
        if request.model == "worker":
            return {
                "tool_calls": [{"name": "approve", "arguments": {"summary": "found 42"}}],
                "usage": usage(1000, 500, 100),
            }
        delegated = any(m.role == "tool" for m in request.messages)
        if not delegated:
            return {
                "tool_calls": [{"name": "researcher", "arguments": {"task": "find"}}],
                "usage": usage(2000, 100),
            }
        return {"content": "The answer is 42.", "usage": usage(3000, 200)}

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_usage_rolls_up_over_the_subagent_tree_by_model(sa_runtime_factory):
    async with sa_runtime_factory(packs=[tree_pack()], providers={"test": provider()}) as rt:
        lead = await rt.create_thread("lead")
        await lead.send_message("research")
        await rt.wait_idle(60)
        usage_all = await lead.usage()
        own_only = await lead.usage(include_descendants=False)
        child = await lead.get_child_thread(lead.children[0].reference)
        assert child is not None
        child_usage = await child.usage()
    mine = usage_all.thread
    assert (mine.input_tokens, mine.output_tokens, mine.model_calls) == (5000, 300, 2)
    assert mine.cost_usd == pytest.approx((5000 * 1 + 300 * 2) / 1e6)
    tree = usage_all.tree
    assert tree is not None and usage_all.descendant_count == 1
    assert (tree.input_tokens, tree.output_tokens, tree.reasoning_tokens) == (6000, 800, 100)
    assert tree.model_calls == 3
    assert tree.cost_usd == pytest.approx((6000 * 1 + 800 * 2) / 1e6)
    assert sorted(tree.by_model) == ["parent_model", "worker_model"]
    assert tree.by_model["worker_model"].input_tokens == 1000
    assert tree.by_model["worker_model"].model_calls == 1
    assert own_only.tree is None and own_only.thread == mine
    assert child_usage.thread.input_tokens == 1000 and child_usage.descendant_count == 0


@pytest.mark.asyncio
async def test_cost_budget_stops_the_turn_with_budget_exceeded(sa_runtime_factory):
    # The first parent call costs 0.0022 USD; the budget allows less, so the next call is refused.
    pack = tree_pack(env={"SA_MAX_COST_USD": "0.002"})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider()}) as rt:
        lead = await rt.create_thread("lead")
        await lead.send_message("research")
        await rt.wait_idle(60)
        await lead.refresh()
        page = await lead.get_messages()
        child = await lead.get_child_thread(lead.children[0].reference)
        assert child is not None
        child_page = await child.get_messages()
        usage_all = await lead.usage()
    assert lead.row.execution["last_stop_reason"] == "budget_exceeded"
    stopped = page.messages[-1]
    assert stopped.role == "assistant" and stopped.status == "failed"
    assert "SA_MAX_COST_USD" in stopped.content and "Budget exceeded" in stopped.content
    # The child inherited the budget: it never called its model and told its parent why.
    assert usage_all.tree is not None and usage_all.tree.model_calls == 1
    assert child_page.messages[-1].status == "failed"
    assert "SA_MAX_COST_USD" in child_page.messages[-1].content
    delegation = [m for m in page.messages if m.role == "tool"][0]
    assert delegation.tool_status == "error"
    assert "Budget exceeded: SA_MAX_COST_USD" in delegation.content
    assert lead.children[0].status == "terminated"  # non-resumable: the failure was its result


@pytest.mark.asyncio
async def test_token_budget_set_on_the_thread_is_inherited_and_survives_restart(
    sa_runtime_factory,
):
    async with sa_runtime_factory(packs=[tree_pack()], providers={"test": provider()}) as rt:
        lead = await rt.create_thread("lead", env={"SA_MAX_TOKENS": "2500"})
        await lead.send_message("research")
        await rt.wait_idle(60)
        thread_id = lead.thread_id
    # A new runtime on the same database: usage and the budget come from the database.
    async with sa_runtime_factory(packs=[tree_pack()], providers={"test": provider()}) as rt:
        lead = await rt.get_thread(thread_id)
        usage_all = await lead.usage()
        await lead.send_message("again")
        await rt.wait_idle(60)
        page = await lead.get_messages()
        after = await lead.usage()
    assert usage_all.tree is not None and usage_all.tree.total_tokens >= 2100
    assert after.tree is not None and after.tree.model_calls == usage_all.tree.model_calls
    assert page.messages[-1].status == "failed" and "SA_MAX_TOKENS" in page.messages[-1].content


@pytest.mark.asyncio
async def test_threads_without_budgets_are_not_limited(sa_runtime_factory):
    async with sa_runtime_factory(packs=[tree_pack()], providers={"test": provider()}) as rt:
        lead = await rt.create_thread("lead")
        await lead.send_message("research")
        await rt.wait_idle(60)
        page = await lead.get_messages()
    assert page.messages[-1].content == "The answer is 42."


def test_usage_over_http(sa_database_url):
    from litestar.testing import TestClient

    from sa_core.server import create_app

    runtime = Runtime(
        packs=[tree_pack()],
        providers={"test": provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as client:
        key, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {key}"
        base = "/api/packages/budget/threads"
        thread_id = client.post(base + "/", json={"agent": "lead"}).json()["id"]
        sent = client.post(f"{base}/{thread_id}/messages", json={"content": "go"})
        assert sent.status_code == 202
        client.blocking_portal.call(runtime.wait_idle, 10)
        body = client.get(f"{base}/{thread_id}/usage").json()
        own = client.get(f"{base}/{thread_id}/usage", params={"include_descendants": "false"})
        missing = client.get(f"{base}/nope/usage")
    assert body["thread_id"] == thread_id
    assert body["thread"]["input_tokens"] == 5000 and body["tree"]["input_tokens"] == 6000
    assert body["tree"]["by_model"]["worker_model"]["reasoning_tokens"] == 100
    assert body["tree"]["cost_usd"] == pytest.approx(0.0076)
    assert body["descendant_count"] == 1
    assert own.status_code == 200 and own.json()["tree"] is None
    assert missing.status_code == 404


def test_budget_set_over_http_stops_the_thread(sa_database_url):
    from litestar.testing import TestClient

    from sa_core.server import create_app

    runtime = Runtime(
        packs=[tree_pack()],
        providers={"test": provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as client:
        key, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {key}"
        base = "/api/packages/budget/threads"
        created = client.post(base + "/", json={"agent": "lead", "env": {"SA_MAX_TOKENS": "100"}})
        assert created.status_code == 201, created.text
        thread_id = created.json()["id"]
        client.post(f"{base}/{thread_id}/messages", json={"content": "go"})
        client.blocking_portal.call(runtime.wait_idle, 10)
        messages = client.get(f"{base}/{thread_id}/messages").json()["messages"]
        usage = client.get(f"{base}/{thread_id}/usage").json()
        children = client.get(f"{base}/{thread_id}/children").json()["children"]
    last = messages[-1]
    assert last["role"] == "assistant" and last["status"] == "failed"
    assert last["content"].startswith("Budget exceeded: SA_MAX_TOKENS is 100")
    # One parent call (2100 tokens) crossed the budget; the child was refused before its model.
    assert usage["tree"]["model_calls"] == 1
    assert children[0]["status"] == "terminated"  # non-resumable: reported, so terminated


# $1 per million input tokens, $2 output, $0.10 for cache reads and $1.25 for cache writes.
CACHING = define_model(
    name="caching_model",
    provider="test",
    model="caching",
    input_price=1.0,
    output_price=2.0,
    cached_price=0.1,
    cache_write_price=1.25,
)


def looping_pack(**agent_fields: Any) -> Pack:
    """A ``looper`` agent whose model calls ``noop`` again and again."""
    noop = define_tool(name="noop", description="Do nothing.", args=Task, execute=lambda s, a: "ok")
    prompt = define_prompt(
        name="loop", model="caching_model", prompt="Loop.", include_chat=True, tools=["noop"]
    )
    looper = define_agent(name="looper", side_a={"prompt": "loop"}, **agent_fields)
    return Pack(name="cachebudget", agents=[looper], prompts=[prompt], models=[CACHING], tools=[noop])


def caching_provider() -> FunctionProvider:
    """Every call: 10,000 prompt tokens (8,000 read from the cache, 1,000 written), 100 out."""

    def answer(request: Any) -> Any:
        return {
            "tool_calls": [{"name": "noop", "arguments": {"task": "again"}}],
            "usage": usage(10_000, 100) | {"cached_tokens": 8_000, "cache_write_tokens": 1_000},
        }

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_cost_budget_prices_cache_reads_and_writes_at_their_own_prices(sa_runtime_factory):
    # One call costs 1,000 x $1 + 8,000 x $0.10 + 1,000 x $1.25 + 100 x $2 = $0.00325 per million
    # (at the plain input price it would be $0.0102 and the second call would be refused).
    pack = looping_pack(env={"SA_MAX_COST_USD": "0.005"})
    async with sa_runtime_factory(packs=[pack], providers={"test": caching_provider()}) as rt:
        thread = await rt.create_thread("looper")
        await thread.send_message("go")
        await rt.wait_idle(60)
        await thread.refresh()
        spent = (await thread.usage()).thread
        page = await thread.get_messages()
    assert thread.row.execution["last_stop_reason"] == "budget_exceeded"
    assert spent.model_calls == 2
    assert (spent.input_tokens, spent.cached_tokens, spent.cache_write_tokens) == (
        20_000,
        16_000,
        2_000,
    )
    assert spent.cost_usd == pytest.approx(2 * 3_250 / 1e6)
    assert "Budget exceeded" in page.messages[-1].content
