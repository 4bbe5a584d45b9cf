"""A property of forks: at any quiescent cut of any history, the fork is the source as it was.

Random sequences of plain messages, tool rounds writing, deleting and moving files, values
set, children spawned (non-blocking) and asked (blocking, settled within the round); forks at
random quiescent cuts (a user message, or the answer that ends a round). The fork's messages,
files (content hashes), values and registry equal the source's at the cut, and later writes
on either side never show on the other.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sa_core.runtime import Runtime
from timetravel_kit import Lead, pack

PATHS = ["/a.txt", "/b.txt", "/d/c.txt"]
TEXTS = ["x", "y", "zz"]

command = st.one_of(
    st.sampled_from(TEXTS).map(lambda text: f"hello {text}"),
    st.tuples(st.sampled_from(PATHS), st.sampled_from(TEXTS)).map(lambda p: f"write {p[0]} {p[1]}"),
    st.sampled_from(PATHS).map(lambda path: f"delete {path}"),
    st.tuples(st.sampled_from(PATHS), st.sampled_from(PATHS)).map(lambda p: f"move {p[0]} {p[1]}"),
    st.tuples(st.sampled_from(["k", "j"]), st.sampled_from(TEXTS)).map(lambda p: f"set {p[0]} {p[1]}"),
    st.tuples(st.sampled_from(PATHS), st.sampled_from(TEXTS)).map(lambda p: f"both {p[0]} {p[1]}"),
    st.sampled_from(["spawn task", "ask task"]),
)
scenario = st.tuples(
    st.lists(command, min_size=1, max_size=7),
    st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=3),
    st.lists(command, max_size=3),
    st.lists(command, max_size=3),
)
_databases = itertools.count()


async def state(runtime: Runtime, thread: Any) -> dict[str, Any]:
    """What a fork must reproduce: history, files by hash, values, registry."""
    messages = (await thread.get_messages(limit=1000, include_silent=True)).messages
    await thread.refresh()
    return {
        "history": [m.id for m in messages],
        "files": {r.path: r.content_hash for r in await thread.find_files("*")},
        "values": await runtime.store.list_values(thread.thread_id),
        "registry": [(c.name, c.status) for c in thread.children],
    }


async def run(url: str, steps: list[str], picks: list[int], on_source: list[str], on_fork: list[str]) -> None:
    lead = Lead()
    lead.gate.set()
    async with Runtime(packs=[pack()], providers={"test": lead.provider}, database_url=url, load_entrypoints=False) as runtime:
        source = await runtime.create_thread("lead")
        cuts: list[tuple[str, dict[str, Any]]] = []
        for step in steps:
            before = await state(runtime, source)
            await source.send_message(step)
            await runtime.wait_idle(timeout=30)
            after = await state(runtime, source)
            user = next(m for m in reversed((await source.get_messages(limit=1000)).messages) if m.content == step)
            cuts.append((user.id, {**before, "history": before["history"] + [user.id]}))
            cuts.append((after["history"][-1], after))
        for pick in picks:
            message_id, expected = cuts[pick % len(cuts)]
            fork = await source.fork(at=message_id)
            forked = await state(runtime, fork)
            names = [name for name, _ in expected["registry"]]
            assert forked["history"] == expected["history"]
            assert forked["files"] == expected["files"] and forked["values"] == expected["values"]
            assert [name for name, _ in forked["registry"]] == names
            assert [status for _, status in forked["registry"]] == [s for _, s in expected["registry"]]
            source_now = await state(runtime, source)
            for step in on_fork:
                await fork.send_message(step)
                await runtime.wait_idle(timeout=30)
            assert await state(runtime, source) == source_now
            fork_now = await state(runtime, fork)
            for step in on_source:
                await source.send_message(step)
                await runtime.wait_idle(timeout=30)
            assert await state(runtime, fork) == fork_now


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario)
def test_a_fork_at_any_quiescent_cut_is_the_source_as_it_was_and_stays_apart(
    tmp_path: Path, case: tuple[list[str], list[int], list[str], list[str]]
) -> None:
    steps, picks, on_source, on_fork = case
    url = f"sqlite:///{tmp_path / f'sa{next(_databases)}.db'}"
    asyncio.run(run(url, steps, picks, on_source, on_fork))
