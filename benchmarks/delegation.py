"""Per-delegation cost: a blocking ``dual_ai`` subagent with two child steps.

Run: ``python benchmarks/delegation.py [--short] [--explain]``. Each delegation is one parent turn
in a fresh parent thread: the parent calls the subagent tool, the child (its own durable thread)
runs side A once (text) and side B once (the ``approve`` session stop), and the parent answers
with the result. The figure is the whole parent turn (4 model steps, 2 threads), every row
durably written. Target: <= 2.0 ms per delegation.

``--explain`` adds one more round that counts what a delegation is made of, figures that do not
depend on how busy the machine is: the write transactions and SQL statements on the store's
connection, the bytes and ``write`` calls the process made (the write-ahead log's pages, and
the background checkpoint's copies of them), the Python and C function calls the interpreter
ran, and the cyclic garbage collector's passes and time.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import parse_args, summary  # noqa: E402


def build_pack() -> Any:
    """The lead agent and its blocking ``dual_ai`` researcher."""
    from pydantic import BaseModel

    from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

    class Task(BaseModel):
        task: str

    class Summary(BaseModel):
        summary: str

    approve = define_tool(
        name="approve", description="Approve.", args=Summary, execute=lambda state, args: "ok"
    )
    coordinator = define_prompt(
        name="coordinator",
        model="lead_model",
        prompt="Coordinate.",
        include_chat=True,
        tools=[{"name": "researcher", "blocking": True, "initUserMessageProperty": "task"}],
    )
    worker = define_prompt(
        name="worker", model="worker_model", prompt="Research.", include_chat=True,
        required_schema=Task,
    )
    reviewer = define_prompt(
        name="reviewer", model="reviewer_model", prompt="Review.", include_chat=True,
        tools=["approve"],
    )
    researcher = define_agent(
        name="researcher",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Researches a topic.",
        max_session_turns=5,
        side_a={"prompt": "worker"},
        side_b={
            "prompt": "reviewer",
            "stop_on_response": False,
            "session_stop": {"name": "approve", "message_property": "summary"},
        },
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"})
    models = [
        define_model(name=f"{role}_model", provider="test", model=role)
        for role in ("lead", "worker", "reviewer")
    ]
    return Pack(
        name="bench",
        agents=[lead, researcher],
        prompts=[coordinator, worker, reviewer],
        models=models,
        tools=[approve],
    )


def build_provider() -> Any:
    """A provider answering per wire model: lead (call, then text), worker, reviewer."""
    from sa_core.testing import FunctionProvider

    call = {"tool_calls": [{"name": "researcher", "arguments": {"task": "find 42"}}]}
    verdict = {"tool_calls": [{"name": "approve", "arguments": {"summary": "Findings: 42"}}]}

    def answer(request: Any) -> Any:
        if request.model == "lead":
            return "Summarized" if request.messages[-1].role == "tool" else call
        if request.model == "worker":
            return "Here is what I found"
        return verdict

    return FunctionProvider(answer)


def open_runtime(database: Path, provider: Any) -> Any:
    """A fresh runtime over a SQLite file at ``database``, serving the benchmark's pack."""
    from sa_core import Runtime

    return Runtime(
        packs=[build_pack()],
        providers={"test": provider},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    )


async def one_round(database: Path, delegations: int) -> tuple[float, float, float]:
    """(wall ms, CPU ms, event-loop thread CPU ms) per delegation over one fresh runtime."""
    provider = build_provider()
    wall = cpu = loop_cpu = 0.0
    async with open_runtime(database, provider) as runtime:
        for _ in range(delegations):
            parent = await runtime.create_thread("lead")
            start, cpu_start = time.perf_counter(), time.process_time()
            thread_start = time.thread_time()
            await parent.send_message("research please")
            wall += time.perf_counter() - start
            cpu += time.process_time() - cpu_start
            loop_cpu += time.thread_time() - thread_start
        await parent.refresh()
        page = await parent.get_messages()
        assert page.messages[-1].content == "Summarized", page.messages[-1]
        assert page.messages[2].content.startswith("Findings: 42"), page.messages[2]
        assert provider.call_count == delegations * 4, provider.call_count
    return wall / delegations * 1000, cpu / delegations * 1000, loop_cpu / delegations * 1000


def _process_io() -> tuple[int, int]:
    """(bytes, calls) this process has written with ``write``-family calls (``/proc``)."""
    fields = dict(
        line.split(": ") for line in Path("/proc/self/io").read_text().splitlines() if ": " in line
    )
    return int(fields["wchar"]), int(fields["syscw"])


async def explain(database: Path, delegations: int) -> dict[str, float]:
    """What one delegation is made of, counted over ``delegations`` after a warm-up.

    A first loop traces the statements, the bytes written and the collector; a second one counts
    function calls (the profile hook would slow the first one's collector timings).
    """
    import gc

    statements: list[str] = []
    calls = {"python": 0, "c": 0}
    collections = {"passes": 0, "seconds": 0.0}
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collections["passes"] += 1
            collections["seconds"] += time.perf_counter() - started[0]

    def on_call(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls["python"] += 1
        elif event == "c_call":
            calls["c"] += 1

    async with open_runtime(database, build_provider()) as runtime:
        for _ in range(20):  # warm-up: caches, prepared statements, first pages
            warm = await runtime.create_thread("lead")
            await warm.send_message("research please")
        traced = [await runtime.create_thread("lead") for _ in range(delegations)]
        counted = [await runtime.create_thread("lead") for _ in range(delegations)]
        raw = runtime.store._backend._writer.connection.dbapi_connection  # benchmark-only peek
        gc.callbacks.append(on_gc)
        raw.set_trace_callback(statements.append)
        written, writes = _process_io()
        try:
            for parent in traced:
                await parent.send_message("research please")
            wrote, write_calls = _process_io()
        finally:
            raw.set_trace_callback(None)
            gc.callbacks.remove(on_gc)
        sys.setprofile(on_call)
        try:
            for parent in counted:
                await parent.send_message("research please")
        finally:
            sys.setprofile(None)
    commits = sum(statement.strip().upper() == "COMMIT" for statement in statements)
    control = ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT", "RELEASE")
    rows = [s for s in statements if not s.lstrip().upper().startswith(control)]
    return {
        "commits": commits / delegations,
        "statements": len(rows) / delegations,
        "selects": sum(s.lstrip().upper().startswith("SELECT") for s in rows) / delegations,
        "kib_written": (wrote - written) / 1024 / delegations,
        "write_calls": (write_calls - writes) / delegations,
        "python_calls": calls["python"] / delegations,
        "c_calls": calls["c"] / delegations,
        "gc_passes": collections["passes"] / delegations,
        "gc_ms": collections["seconds"] * 1000 / delegations,
    }


def print_explained(figures: dict[str, float]) -> None:
    """Print :func:`explain`'s counts."""
    print("  what one delegation is made of (counted, not timed; --explain):")
    print(f"    write transactions: {figures['commits']:.1f}; SQL statements: "
          f"{figures['statements']:.1f} ({figures['selects']:.1f} SELECT)")
    print(f"    written by the process: {figures['kib_written']:.0f} KiB in "
          f"{figures['write_calls']:.0f} write calls (log pages, and the checkpoint's copies)")
    print(f"    function calls: {figures['python_calls']:.0f} Python (coroutine resumptions "
          f"included), {figures['c_calls']:.0f} C")
    print(f"    cyclic garbage collector: {figures['gc_passes']:.2f} passes, "
          f"{figures['gc_ms']:.3f} ms")


def main() -> None:
    """Print the per-delegation figures."""
    args = parse_args(__doc__ or "")
    delegations = 50 if args.short else 300
    rounds = args.rounds or (1 if args.short else 3)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            results.append(asyncio.run(one_round(Path(tmp) / f"deleg-{index}.db", delegations)))
    print(f"delegation ({delegations} blocking dual_ai delegations, 2 child steps each, SQLite):")
    print(f"  wall per delegation: {summary([r[0] for r in results])}; target <= 2.0 ms")
    print(f"  cpu per delegation:  {summary([r[1] for r in results])}")
    print(f"  of which the event loop's thread: {summary([r[2] for r in results])}")
    if args.explain:
        with tempfile.TemporaryDirectory() as tmp:
            print_explained(asyncio.run(explain(Path(tmp) / "explain.db", delegations)))


if __name__ == "__main__":
    main()
