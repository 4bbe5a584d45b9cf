"""Costs of usage roll-ups, budget checks and MCP tool calls.

Run: ``python benchmarks/extensions.py``. Prints:

- the time of ``thread.usage()`` over a tree of 1 root + 50 children x 4 grandchildren (251
  threads, 5 model calls each: 1255 ``llm_call`` rows), which is what every budget check runs;
- the per-step engine time of a 100-step tool loop with and without a budget variable set;
- the round trip of one MCP ``tools/call`` over stdio and the server's lazy start.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def usage_tree(database: Path) -> tuple[float, int]:
    """Median milliseconds of a tree usage summary, and the number of threads summed."""
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.runtime import new_log
    from sa_core.testing import TestProvider

    model = define_model(name="m", provider="test", model="m", input_price=1, output_price=2)
    prompt = define_prompt(name="p", model="m", prompt="x")
    agent = define_agent(name="a", side_a={"prompt": "p"})
    pack = Pack(name="bench", agents=[agent], prompts=[prompt], models=[model])
    async with Runtime(
        packs=[pack],
        providers={"test": TestProvider()},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    ) as runtime:
        root = await runtime.create_thread("a")
        threads = [root]
        for _ in range(50):
            child = await runtime.create_thread("a", parent_id=root.thread_id)
            threads.append(child)
            for _ in range(4):
                threads.append(await runtime.create_thread("a", parent_id=child.thread_id))
        data = {"model_name": "m", "input_tokens": 100, "output_tokens": 20, "cost_total": 1e-4}
        for thread in threads:
            for _ in range(5):
                await runtime.store.insert_log(thread.thread_id, new_log("llm_call", data))
        timings = []
        for _ in range(30):
            start = time.perf_counter()
            usage = await root.usage()
            timings.append((time.perf_counter() - start) * 1000)
        assert usage.tree is not None and usage.tree.model_calls == len(threads) * 5
        return statistics.median(timings), len(threads)


async def step_time(database: Path, env: dict[str, str]) -> float:
    """Milliseconds per model step of a 100-step tool loop."""
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
    from sa_core.testing import TestProvider, TestScript

    tool = define_tool(name="tick", description="Count.", execute=lambda state: "ok")
    prompt = define_prompt(name="loop", model="fast", prompt="Loop.", tools=["tick"])
    agent = define_agent(name="looper", side_a={"prompt": "loop", "max_steps": 200})
    model = define_model(name="fast", provider="test", model="bench")
    pack = Pack(name="bench", agents=[agent], prompts=[prompt], models=[model], tools=[tool])
    script = TestScript()
    for _ in range(99):
        script.add_tool_call_response([{"name": "tick", "arguments": {}}])
    script.add_text_response("done")
    async with Runtime(
        packs=[pack],
        providers={"test": TestProvider(script)},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("looper", env=env)
        start = time.perf_counter()
        await thread.send_message("go")
        await runtime.wait_idle(60)
        return (time.perf_counter() - start) * 1000 / 100


async def mcp_call(database: Path) -> tuple[float, float]:
    """(first call including the lazy server start, median later call) in milliseconds."""
    from sa_core import Pack, Runtime, define_agent, define_mcp_server, define_model, define_prompt
    from sa_core.testing import TestProvider

    server = define_mcp_server(
        name="testing", command=[sys.executable, str(ROOT / "tests" / "support_mcp_server.py")]
    )
    prompt = define_prompt(name="p", model="m", prompt="x", tools=["testing.add"])
    agent = define_agent(name="a", side_a={"prompt": "p"})
    model = define_model(name="m", provider="test", model="m")
    pack = Pack(name="b", agents=[agent], prompts=[prompt], models=[model], mcp_servers=[server])
    async with Runtime(
        packs=[pack],
        providers={"test": TestProvider()},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("a")
        timings = []
        for _ in range(51):
            start = time.perf_counter()
            result: Any = await thread.invoke_tool("testing.add", {"a": 1, "b": 2})
            timings.append((time.perf_counter() - start) * 1000)
            assert result.result == "3", result
        return timings[0], statistics.median(timings[1:])


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        median, count = await usage_tree(folder / "usage.db")
        print(f"usage roll-up over {count} threads / {count * 5} llm_call rows: {median:.2f} ms")
        plain = await step_time(folder / "plain.db", {})
        budget = await step_time(folder / "budget.db", {"SA_MAX_COST_USD": "100"})
        print(f"model step, no budget: {plain:.3f} ms; with SA_MAX_COST_USD: {budget:.3f} ms")
        first, later = await mcp_call(folder / "mcp.db")
        print(f"MCP tools/call over stdio: first (lazy start) {first:.0f} ms, then {later:.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
