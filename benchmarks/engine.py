"""Engine overhead: per model step (TestProvider, 200-step tool loop, SQLite file) and import time.

Run: ``python benchmarks/engine.py [--short]``. Design targets: at most 1 ms per model step including the
durable writes; ``import sa_core`` under 0.3 s.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = 200
ROUNDS = 5


def import_time() -> float:
    """Seconds ``import sa_core`` takes in a fresh interpreter (best of 5).

    Timed inside the interpreter, around the import alone: the difference of two whole
    interpreter runs is smaller than their spread on a busy machine, and can come out negative.
    """
    code = "import time; s = time.perf_counter(); import sa_core; print(time.perf_counter() - s)"
    best = float("inf")
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        best = min(best, float(out.stdout))
    return best


async def step_overhead(database: Path, rounds: int = ROUNDS) -> list[tuple[float, float]]:
    """(wall, CPU) milliseconds per model step over a 200-step tool loop, one pair per round.

    CPU time is the process's own: engine, store and test provider, without time lost to other
    processes on a busy machine.
    """
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
    from sa_core.testing import TestProvider, TestScript

    tool = define_tool(name="tick", description="Count.", execute=lambda state: "ok")
    prompt = define_prompt(name="loop", model="fast", prompt="Loop.", include_chat=True, tools=["tick"])
    agent = define_agent(name="looper", side_a={"prompt": "loop"})
    model = define_model(name="fast", provider="test", model="bench")
    pack = Pack(name="bench", agents=[agent], prompts=[prompt], models=[model], tools=[tool])
    results = []
    for round_index in range(rounds):
        script = TestScript()
        usage = {"prompt_tokens": 100, "completion_tokens": 10}
        for _ in range(STEPS - 1):
            script.add_tool_call_response([{"name": "tick", "arguments": {}}], usage=usage)
        script.add_text_response("done", usage=usage)
        provider = TestProvider(script)
        url = f"sqlite:///{database.parent / f'bench-{round_index}.db'}"
        async with Runtime(packs=[pack], providers={"test": provider}, database_url=url, load_entrypoints=False) as runtime:
            thread = await runtime.create_thread("looper")
            start, cpu_start = time.perf_counter(), time.process_time()
            await thread.send_message("go")
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            assert provider.call_count == STEPS, provider.call_count
        results.append((elapsed / STEPS * 1000, cpu / STEPS * 1000))
    return results


def main() -> None:
    """Print the numbers."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import parse_args

    args = parse_args(__doc__ or "")
    rounds = args.rounds or (2 if args.short else ROUNDS)
    with tempfile.TemporaryDirectory() as tmp:
        per_step = asyncio.run(step_overhead(Path(tmp) / "bench.db", rounds))
    imported = import_time()
    wall = [w for w, _ in per_step]
    cpu = [c for _, c in per_step]
    print(f"model step overhead ({STEPS}-step tool loop, TestProvider, SQLite file, WAL):")
    print(f"  wall: median {statistics.median(wall):.3f} ms/step "
          f"(min {min(wall):.3f}, max {max(wall):.3f}, {rounds} rounds; target <= 0.45 ms)")
    print(f"  cpu:  median {statistics.median(cpu):.3f} ms/step (min {min(cpu):.3f})")
    print(f"import sa_core: {imported * 1000:.1f} ms (target < 300 ms)")


if __name__ == "__main__":
    main()
