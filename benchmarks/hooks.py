"""Hook-call overhead per model step with no hooks defined, and with one global plugin.

Run: ``python benchmarks/hooks.py``. A model step makes about seven lifecycle hook calls
(filter, prefilter, before/after create and update, before store tool result); this times seven
calls through the plugin host's typed facade (the string-named calls on a host without one) on a
real ``ThreadState`` of a pack that defines no hooks, as microseconds per step (best of 5 rounds
of 5,000 steps).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

STEPS = 5_000
ROUNDS = 5


class Observer:
    """A global plugin implementing one observational hook."""

    calls = 0

    def sa_after_create_message(self, state: Any, message: Any) -> None:
        Observer.calls += 1


async def per_step(plugins: list[object], database: Path) -> float:
    """Best microseconds per step of seven hook calls."""
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.engine.messages import new_message
    from sa_hooks import hookimpl

    for plugin in plugins:
        hookimpl(type(plugin).sa_after_create_message)
    pack = Pack(
        name="bench",
        agents=[define_agent(name="a", side_a={"prompt": "p"})],
        prompts=[define_prompt(name="p", model="m", prompt="x")],
        models=[define_model(name="m", provider="test", model="m")],
    )
    url = f"sqlite:///{database}"
    async with Runtime(
        packs=[pack], database_url=url, load_entrypoints=False, plugins=plugins
    ) as runtime:
        thread = await runtime.create_thread("a")
        host = runtime.host
        message = new_message(thread.thread_id, "user", "hi")
        history = [message]

        typed = getattr(host, "hooks", None)

        async def typed_step() -> None:
            assert typed is not None
            await typed.filter_messages(thread, history)
            await typed.prefilter_llm_history(thread, history)
            await typed.before_create_message(thread, message)
            await typed.after_create_message(thread, message)
            await typed.before_update_message(thread, message.id, {})
            await typed.after_update_message(thread, message)
            await typed.before_store_tool_result(thread, None, None)

        async def string_step() -> None:  # the string-named calls the engine made before
            await host.chain("filter_messages", history, state=thread)
            await host.chain("prefilter_llm_history", history, state=thread)
            await host.chain("before_create_message", message, state=thread)
            await host.notify("after_create_message", state=thread, message=message)
            await host.chain("before_update_message", {}, state=thread, message_id=message.id)
            await host.notify("after_update_message", state=thread, message=message)
            await host.chain("before_store_tool_result", None, state=thread, tool_call=None)

        step = typed_step if typed is not None else string_step
        best = float("inf")
        for _ in range(ROUNDS):
            start = time.perf_counter()
            for _ in range(STEPS):
                await step()
            best = min(best, (time.perf_counter() - start) / STEPS * 1e6)
        return best


def main() -> None:
    """Print the per-step hook overhead."""
    with tempfile.TemporaryDirectory() as tmp:
        none = asyncio.run(per_step([], Path(tmp) / "a.db"))
        one = asyncio.run(per_step([Observer()], Path(tmp) / "b.db"))
    print(f"7 hook calls per step, no hooks defined:      {none:6.1f} us")
    print(f"7 hook calls per step, one observing plugin:  {one:6.1f} us")


if __name__ == "__main__":
    main()
