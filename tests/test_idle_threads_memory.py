"""An idle thread holds no per-thread entry in the process beyond caches with a bound."""

from __future__ import annotations

import gc

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.engine.model import context
from sa_core.offline import OfflineProvider

KEEP = 3


def pack() -> Pack:
    return Pack(
        name="idle",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="P.", include_chat=True)],
        models=[define_model(name="fast", provider="test", model="m")],
    )


@pytest.mark.asyncio
async def test_many_finished_threads_leave_only_bounded_entries(
    sa_runtime_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "CONVERTED_THREADS", 5)
    context.forget_converted()
    provider = OfflineProvider(keep=KEEP)
    async with sa_runtime_factory(packs=[pack()], providers={"test": provider}) as rt:
        for _ in range(30):
            thread = await rt.create_thread("a")
            async with rt.events.subscribe(thread.thread_id, max_backlog=100) as frames:
                for turn in range(2):
                    await thread.send_message(f"hello {turn}")
                assert not frames.empty()
            del thread
        gc.collect()
        assert rt.events.subscriber_count() == 0 and rt.events.thread_count == 0
        # the provider's kept requests may hold their threads' state: bounded by ``keep``
        assert len(rt.kernel.threads) <= provider.keep
        assert len(context._converters) <= 5
        assert len(provider.requests) == KEEP
    context.forget_converted()
