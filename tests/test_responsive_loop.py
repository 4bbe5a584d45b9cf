"""``sa serve``'s event loop: requests and streams first, background turns in slices."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.cli import build_parser
from sa_core.engine.priority import BACKGROUND, background_context
from sa_core.server.eventloop import ResponsiveEventLoop
from sa_core.testing import TestProvider, TestScript

BACKGROUND_TASKS = 50


def run_on(
    loop_factory: Callable[[], asyncio.AbstractEventLoop], main: Coroutine[Any, Any, Any]
) -> Any:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)


def one_callback_a_pass() -> ResponsiveEventLoop:
    loop = ResponsiveEventLoop()
    loop.slice_seconds = 0.0  # deterministic: one background callback per pass
    return loop


async def background_steps_before_a_request_finishes() -> int:
    """Background steps run while a request task goes through three awaits."""
    steps = 0
    stop = asyncio.Event()

    async def turn() -> None:
        nonlocal steps
        while not stop.is_set():
            steps += 1
            await asyncio.sleep(0)

    turns = [
        asyncio.create_task(turn(), context=background_context()) for _ in range(BACKGROUND_TASKS)
    ]
    await asyncio.sleep(0)  # every turn is running

    async def request() -> int:
        before = steps
        for _ in range(3):
            await asyncio.sleep(0)
        return steps - before

    ran = await asyncio.create_task(request())
    stop.set()
    await asyncio.gather(*turns)
    return ran


def test_a_request_goes_before_the_background_turns_that_are_ready() -> None:
    """A request task's three steps run ahead of 50 ready turns (asyncio: after 150 steps)."""
    stock = run_on(asyncio.SelectorEventLoop, background_steps_before_a_request_finishes())
    responsive = run_on(one_callback_a_pass, background_steps_before_a_request_finishes())
    assert stock >= 3 * BACKGROUND_TASKS  # every ready turn steps once in each pass
    assert responsive <= 1  # the request's continuations run in the slice, before any turn


async def background_finishes_while_requests_spin() -> bool:
    spinning = True

    async def request() -> None:
        while spinning:
            await asyncio.sleep(0)  # always ready

    async def turn() -> bool:
        for _ in range(100):
            await asyncio.sleep(0)
        return BACKGROUND.get()

    spinners = [asyncio.create_task(request()) for _ in range(5)]
    try:
        return await asyncio.wait_for(asyncio.create_task(turn(), context=background_context()), 60)
    finally:
        spinning = False
        await asyncio.gather(*spinners)


def test_background_work_advances_while_requests_keep_the_loop_busy() -> None:
    assert run_on(one_callback_a_pass, background_finishes_while_requests_spin()) is True


def test_a_cancelled_background_callback_does_not_run() -> None:
    ran: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        context = background_context()
        loop.call_soon(ran.append, "kept", context=context)
        loop.call_soon(ran.append, "cancelled", context=context).cancel()
        for _ in range(3):
            await asyncio.sleep(0)

    run_on(ResponsiveEventLoop, main())
    assert ran == ["kept"]


def test_a_failing_background_callback_goes_to_the_exception_handler() -> None:
    seen: list[dict[str, Any]] = []
    ran: list[str] = []

    def fail() -> None:
        raise ValueError("boom")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: seen.append(context))
        context = background_context()
        loop.call_soon(fail, context=context)
        loop.call_soon(ran.append, "after", context=context)
        for _ in range(3):
            await asyncio.sleep(0)

    run_on(ResponsiveEventLoop, main())
    assert [type(c["exception"]) for c in seen] == [ValueError]
    assert ran == ["after"]


def test_work_queued_when_a_callback_raised_keyboard_interrupt_runs_when_the_loop_resumes() -> None:
    loop = ResponsiveEventLoop()
    ran: list[str] = []

    def interrupt() -> None:
        raise KeyboardInterrupt

    try:
        context = background_context()
        loop.call_soon(interrupt, context=context)
        loop.call_soon(ran.append, "background", context=context)
        with pytest.raises(KeyboardInterrupt):
            loop.run_forever()
        loop.call_soon(ran.append, "foreground")  # queued for the slice, as background waits
        loop.call_later(0.2, loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    assert ran == ["foreground", "background"]


def test_foreground_callbacks_keep_their_order_and_background_ones_run_after_them() -> None:
    ran: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for index in range(5):
            loop.call_soon(ran.append, index)
        loop.call_soon(ran.append, 5, context=background_context())
        for index in range(6, 9):
            loop.call_soon(ran.append, index)
        for _ in range(4):
            await asyncio.sleep(0)

    run_on(ResponsiveEventLoop, main())
    assert ran == [0, 1, 2, 3, 4, 6, 7, 8, 5]  # background last; the others in order


def test_a_background_callback_runs_in_its_context() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    seen: list[str] = []

    async def main() -> None:
        context = background_context()
        context.run(marker.set, "turn")
        asyncio.get_running_loop().call_soon(lambda: seen.append(marker.get()), context=context)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    run_on(ResponsiveEventLoop, main())
    assert seen == ["turn"]


def test_a_turn_runs_as_background_work_and_completes_on_the_responsive_loop(tmp_path: Any) -> None:
    seen: list[bool] = []

    def tick(state: Any) -> str:
        seen.append(BACKGROUND.get())
        return "ok"

    pack = Pack(
        name="loopcheck",
        agents=[define_agent(name="looper", side_a={"prompt": "loop"})],
        prompts=[
            define_prompt(
                name="loop", model="fast", prompt="Loop.", include_chat=True, tools=["tick"]
            )
        ],
        models=[define_model(name="fast", provider="test", model="m")],
        tools=[define_tool(name="tick", description="Count.", execute=tick)],
    )
    script = TestScript()
    for _ in range(3):
        script.add_tool_call_response([{"name": "tick", "arguments": {}}])
    script.add_text_response("done")

    async def main() -> str:
        url = f"sqlite:///{tmp_path / 'loop.db'}"
        async with Runtime(
            packs=[pack],
            providers={"test": TestProvider(script)},
            database_url=url,
            load_entrypoints=False,
        ) as runtime:
            thread = await runtime.create_thread("looper")
            await thread.send_message("go", wait=False)
            await runtime.wait_idle()
            messages = await thread.get_messages()
            return messages.messages[-1].content or ""

    assert run_on(ResponsiveEventLoop, main()) == "done"
    assert seen == [True, True, True]


# Kept last: building the CLI parser first made the runtime test above import engine modules
# for the first time deep inside the event loop, where pytest's assertion rewriting hit a
# CPython 3.11.7 bug ("AST constructor recursion depth mismatch").
def test_sa_serve_runs_on_the_responsive_loop() -> None:
    args = build_parser().parse_args(["serve"])
    loop = args.loop_factory()
    try:
        assert isinstance(loop, ResponsiveEventLoop)
    finally:
        loop.close()
