"""Two runtimes in one process share no engine state: every per-runtime cache is the kernel's.

The engine keeps in memory, per runtime, the threads' converted and filtered histories, the
approval bookkeeping and the blocking calls waiting for a child (``kernel.local``). None of it
lives in a module: a second runtime in the same process (a test, an embedding application)
starts with nothing of the first's and never sees its threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.engine.model.context import Converters
from sa_core.engine.model.pastcontext import FilteredHistories
from sa_core.engine.subagents.child_wait import ChildWaits
from sa_core.engine.tools import approvals
from sa_core.engine.tools.approvals import ApprovalWaits


def pack() -> Pack:
    return Pack(
        name="local",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="P.", include_chat=True)],
        models=[define_model(name="fast", provider="test", model="m")],
    )


def database(tmp_path: Path, name: str) -> str:
    return f"sqlite:///{tmp_path / name}.db"


@pytest.mark.asyncio
async def test_two_runtimes_in_one_process_share_no_cache_or_registry(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    async with (
        sa_runtime_factory(packs=[pack()], database_url=database(tmp_path, "one")) as one,
        sa_runtime_factory(packs=[pack()], database_url=database(tmp_path, "two")) as two,
    ):
        first = await one.create_thread("a")
        second = await two.create_thread("a")
        for turn in range(2):  # a second turn reuses what the first one kept
            await first.send_message(f"hello {turn}")
            await one.wait_idle(timeout=10)
            await second.send_message(f"hello too {turn}")
            await two.wait_idle(timeout=10)

        for kind in (Converters, FilteredHistories, ApprovalWaits, ChildWaits):
            assert one.kernel.local.of(kind) is not two.kernel.local.of(kind), kind.__name__
        for kind in (Converters, FilteredHistories):
            assert first.thread_id in one.kernel.local.of(kind).kept, kind.__name__
            assert first.thread_id not in two.kernel.local.of(kind).kept, kind.__name__
            assert second.thread_id in two.kernel.local.of(kind).kept, kind.__name__
            assert second.thread_id not in one.kernel.local.of(kind).kept, kind.__name__

        approvals.mark_no_pending(one.kernel, "marked-in-one")
        assert approvals.known_clear(one.kernel, "marked-in-one")
        assert not approvals.known_clear(two.kernel, "marked-in-one")
