"""Start-up: a first answer from a fresh process, ``sa --help``, and ``sa serve`` until it answers.

Run: ``python benchmarks/startup.py [--short] [--rounds N]``. Each figure is the median of N
fresh processes (10; 5 with ``--short``) after one warm-up run, so bytecode is cached as it is
for a user's second run. Printed:

- **first answer**: a fresh interpreter runs ``import sa_core``, defines a pack (a model, a
  prompt, an agent), opens a runtime on a new SQLite file, creates a thread and gets the answer
  of a fake model (``sa_core.testing.TestProvider``) to its first message. Wall time from exec
  to exit, the process's CPU time, and the process's own split (import, define, start, answer;
  ``import`` counts from the first line of the script, after the interpreter started). Targets:
  import plus first answer <= 0.45 s. ``load_entrypoints=False``: the framework alone; a second
  line loads the installed packs and plugins too (``Runtime``'s default), which depends on what
  is installed.
- **sa --help**: exec to exit (target <= 0.15 s).
- **sa serve**: exec of ``sa serve --test-provider`` on a new SQLite file to the first ``200``
  of ``GET /health`` (the readiness route: 200 once the runtime started and its database
  answers), wall time and the server process's CPU time by then. A checkout without the route
  (it answers 404) is timed to the first ``200`` of ``GET /`` instead, and the line says so.

Every child runs without ``PYTHONDONTWRITEBYTECODE`` (the warm-up run writes the bytecode
caches, as a user's first run does), whatever this process's environment says.

The interpreter and the code under test: this interpreter and the ``sa_core`` it imports, so
``PYTHONPATH=/path/to/other/checkout python benchmarks/startup.py`` measures another checkout
with the same dependencies (the ``sa`` script imports ``sa_core`` from ``PYTHONPATH`` too).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import parse_args  # noqa: E402
from serve_process import free_port  # noqa: E402

ROUNDS = 10
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The children's environment: bytecode caches written and read, as for a user."""
SHORT_ROUNDS = 5
SA = Path(sys.executable).with_name("sa")

FIRST_ANSWER = """
import time
started = time.perf_counter()
import asyncio, json, sys

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
from sa_core.testing import TestProvider, TestScript

imported = time.perf_counter()
pack = Pack(
    name="hello",
    models=[define_model(name="fast", provider="test", model="fake")],
    prompts=[define_prompt(name="greet", model="fast", prompt="Be brief.", include_chat=True)],
    agents=[define_agent(name="greeter", side_a={"prompt": "greet"})],
)
defined = time.perf_counter()


async def first_answer(database, load_entrypoints):
    provider = TestProvider(TestScript().add_text_response("Hello!"))
    runtime = Runtime(
        packs=[pack],
        providers={"test": provider},
        database_url=f"sqlite:///{database}",
        load_entrypoints=load_entrypoints,
    )
    async with runtime:
        opened = time.perf_counter()
        thread = await runtime.create_thread("greeter")
        await thread.send_message("Hi")
        answer = (await thread.get_messages()).messages[-1]
        assert answer.role == "assistant" and answer.content == "Hello!", answer
        answered = time.perf_counter()
    return opened, answered


opened, answered = asyncio.run(first_answer(sys.argv[1], sys.argv[2] == "1"))
print(json.dumps({
    "import": imported - started,
    "define": defined - imported,
    "start": opened - defined,
    "answer": answered - opened,
}))
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(command: Sequence[str]) -> tuple[float, float, str]:
    """Run a command to its end: (wall seconds from exec to exit, its CPU seconds, its stdout)."""
    cpu = children_cpu()
    start = time.perf_counter()
    # run in a neutral directory: ``-c`` puts the working directory first on ``sys.path``
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
        env=CHILD_ENV,
    )
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return wall, children_cpu() - cpu, done.stdout


def first_answers(rounds: int, load_entrypoints: bool) -> dict[str, list[float]]:
    """Wall, CPU and the in-process split of ``rounds`` fresh first answers (after a warm-up)."""
    figures: dict[str, list[float]] = {"wall": [], "cpu": []}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds + 1):
            database = Path(tmp) / f"first-{index}.db"
            command = [
                sys.executable,
                "-c",
                FIRST_ANSWER,
                str(database),
                str(int(load_entrypoints)),
            ]
            wall, cpu, out = run_measured(command)
            if index == 0:
                continue  # the warm-up: writes the bytecode caches
            figures["wall"].append(wall)
            figures["cpu"].append(cpu)
            for name, seconds in json.loads(out).items():
                figures.setdefault(name, []).append(seconds)
    return figures


def sa_help(rounds: int) -> dict[str, list[float]]:
    """Wall and CPU of ``sa --help`` (after a warm-up)."""
    figures: dict[str, list[float]] = {"wall": [], "cpu": []}
    for index in range(rounds + 1):
        wall, cpu, out = run_measured([str(SA), "--help"])
        assert "usage: sa" in out, out
        if index:
            figures["wall"].append(wall)
            figures["cpu"].append(cpu)
    return figures


def status_of(port: int, path: str) -> int | None:
    """The status code of ``GET path`` on the loopback port, or ``None`` when nothing answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
            )
            line = sock.makefile("rb").readline()
    except OSError:
        return None
    parts = line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) a running process used so far (Linux ``/proc``), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_once(database: Path, timeout: float = 60.0) -> tuple[float, float | None, str]:
    """Exec of ``sa serve --test-provider`` to its first ``200`` on ``GET /health``.

    Returns:
        Wall seconds, the server's CPU seconds by then (None off Linux), and the path timed
        (``/`` for a checkout without ``/health``).
    """
    port = free_port()
    command = [
        str(SA),
        "serve",
        "--test-provider",
        "--port",
        str(port),
        "--db",
        f"sqlite:///{database}",
        "--log-level",
        "warning",
    ]
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=database.parent,
        env=CHILD_ENV,
    )
    path = "/health"
    try:
        while time.perf_counter() - start < timeout:
            status = status_of(port, path)
            if status == 200:
                return time.perf_counter() - start, process_cpu(process.pid), path
            if status == 404 and path == "/health":  # a checkout from before the route
                path = "/"
                continue
            if process.poll() is not None:
                assert process.stderr is not None
                raise RuntimeError(f"sa serve exited: {process.stderr.read().decode()}")
            time.sleep(0.002)
        raise RuntimeError(f"sa serve did not answer within {timeout} s")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve_starts(rounds: int) -> tuple[dict[str, list[float]], str]:
    """``rounds`` start-ups of ``sa serve`` on new databases (after a warm-up), the path timed."""
    figures: dict[str, list[float]] = {"wall": [], "cpu": []}
    path = "/health"
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds + 1):
            seconds, cpu, path = serve_once(Path(tmp) / f"serve-{index}.db")
            if index:
                figures["wall"].append(seconds)
                if cpu is not None:
                    figures["cpu"].append(cpu)
    return figures, path


def line(label: str, values: Sequence[float], target: str = "") -> str:
    """``label: median X ms (min A, max B)``, in milliseconds."""
    ms = [v * 1000 for v in values]
    text = (
        f"  {label}: median {statistics.median(ms):.0f} ms (min {min(ms):.0f}, max {max(ms):.0f})"
    )
    return text + (f"; target {target}" if target else "")


def main() -> None:
    """Print the numbers."""
    args = parse_args(__doc__ or "")
    rounds = args.rounds or (SHORT_ROUNDS if args.short else ROUNDS)
    import sa_core

    print(f"sa_core from {Path(sa_core.__file__).parent}; median of {rounds} fresh processes")
    print(f"load average: {' '.join(f'{n:.2f}' for n in os.getloadavg())}")
    for load_entrypoints in (False, True):
        figures = first_answers(rounds, load_entrypoints)
        title = "installed packs and plugins too" if load_entrypoints else "framework alone"
        print(f"first answer, load_entrypoints={load_entrypoints} ({title}):")
        print(
            line("exec to exit, wall", figures["wall"], "<= 450 ms" if not load_entrypoints else "")
        )
        print(line("exec to exit, CPU ", figures["cpu"]))
        split = ", ".join(
            f"{name} {statistics.median(figures[name]) * 1000:.0f}"
            for name in ("import", "define", "start", "answer")
        )
        print(f"  in the process (ms, medians): {split}")
    print("sa --help:")
    help_figures = sa_help(rounds)
    print(line("exec to exit, wall", help_figures["wall"], "<= 150 ms"))
    print(line("exec to exit, CPU ", help_figures["cpu"]))
    print("sa serve --test-provider, new SQLite file:")
    serve_figures, path = serve_starts(rounds)
    print(line(f"exec to first 200 on GET {path}, wall", serve_figures["wall"]))
    if serve_figures["cpu"]:
        print(line(f"exec to first 200 on GET {path}, CPU ", serve_figures["cpu"]))
    print(f"load average: {' '.join(f'{n:.2f}' for n in os.getloadavg())}")


if __name__ == "__main__":
    main()
