"""Runner steps share the event loop with requests: one step starts per loop pass."""

from __future__ import annotations

import asyncio

import pytest

from sa_core.engine.ration import StepRation


async def _runners(ration: StepRation | None, arrival: str) -> list[str]:
    """Three runners of two steps each; a request arrives during runner a's first step."""
    order: list[str] = []
    loop = asyncio.get_running_loop()

    async def runner(name: str) -> None:
        for step in range(2):
            if ration is not None:
                await ration.wait()
            order.append(f"{name}{step}")
            if f"{name}{step}" == arrival:
                loop.call_soon(order.append, "request")

    await asyncio.gather(*(runner(name) for name in "abc"))
    return order


@pytest.mark.asyncio
async def test_a_request_arriving_during_a_step_is_served_before_other_runners_steps() -> None:
    """Past the pass's budget (here none), steps wait: one a pass, in the order they came."""
    order = await _runners(StepRation(budget=0), arrival="a0")
    assert order == ["a0", "request", "a1", "b0", "c0", "b1", "c1"]


@pytest.mark.asyncio
async def test_steps_within_the_pass_budget_start_at_once() -> None:
    """Cheap steps cost no extra pass: the request comes after them, as without a ration."""
    assert await _runners(StepRation(budget=60.0), arrival="a0") == await _runners(
        None, arrival="a0"
    )


@pytest.mark.asyncio
async def test_without_a_ration_the_request_waits_for_every_ready_step() -> None:
    """What the ration prevents: plain asyncio runs every ready runner first."""
    order = await _runners(None, arrival="a0")
    assert order.index("request") == len(order) - 1


@pytest.mark.asyncio
async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    ration = StepRation(budget=0)
    order: list[str] = []

    async def runner(name: str) -> None:
        await ration.wait()
        order.append(name)

    first = asyncio.ensure_future(runner("a"))
    gone = asyncio.ensure_future(runner("b"))
    last = asyncio.ensure_future(runner("c"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(first, last)
    assert order == ["a", "c"]
    assert ration.waiting == 0


@pytest.mark.asyncio
async def test_busy_threads_take_their_model_steps_in_turn_and_all_finish(
    sa_runtime_factory: object,
) -> None:
    """Eight tool loops at once, steps rationed: every thread steps before any steps thrice."""
    from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
    from sa_core.testing import FunctionProvider

    calls: dict[str, int] = {}
    steps: list[str] = []

    def model(request: object) -> object:
        steps.append(request.user)  # type: ignore[attr-defined]
        thread = request.messages[-1].content or ""  # type: ignore[attr-defined]
        return "done" if thread.startswith("ticked 3") else {"tool_calls": [{"name": "tick"}]}

    async def tick(state: object, args: dict[str, object]) -> str:
        key = state.thread_id  # type: ignore[attr-defined]
        calls[key] = calls.get(key, 0) + 1
        return f"ticked {calls[key]}"

    pack = Pack(
        name="loop",
        agents=[define_agent(name="ticker", side_a={"prompt": "main"})],
        prompts=[
            define_prompt(name="main", model="m", prompt="Tick.", include_chat=True, tools=["tick"])
        ],
        models=[define_model(name="m", provider="test", model="x")],
        tools=[define_tool(name="tick", description="Tick.", execute=tick)],
    )
    factory = sa_runtime_factory  # type: ignore[assignment]
    async with factory(packs=[pack], providers={"test": FunctionProvider(model)}) as rt:  # type: ignore[operator]
        rt.scheduler.step_ration = StepRation(budget=0)  # every step past the first waits
        threads = [await rt.create_thread("ticker") for _ in range(8)]
        await asyncio.gather(*(t.send_message("go", wait=False) for t in threads))
        await rt.wait_idle(timeout=20)
        last = [(await t.get_messages()).messages[-1].content for t in threads]
        assert rt.scheduler.entries() == 0
    assert last == ["done"] * 8
    assert sorted(calls.values()) == [3] * 8
    # without the ration one thread's whole loop runs, then the next one's
    first_steps = max(steps.index(thread) for thread in set(steps))
    third_steps = min([i for i, t in enumerate(steps) if steps[: i + 1].count(t) == 3])
    assert first_steps < third_steps
