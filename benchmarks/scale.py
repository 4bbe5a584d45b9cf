"""Scale-out: turns/s and POST -> first stream frame latency, 1 worker SQLite vs 1/2/4 PostgreSQL.

Run: ``python benchmarks/scale.py [--threads 200] [--turns 2] [--configs sqlite:1,pg:1,pg:2,pg:4]``.
``--repeat N`` runs the configurations N times, alternating, and prints the median CPU per turn
of each against the first configuration's (on a shared machine a single run's ratio moves by a
third; alternated medians do not).

Each configuration starts ``sa serve`` (``--workers N`` for PostgreSQL) on a free loopback port
with a pack whose model is a Chat Completions server on loopback (a separate process answering at
once, streamed). The client opens one SSE stream per thread, then every thread posts a message,
waits for the answer on its stream, and posts the next, all threads concurrently. Reported:
turns per second, p50/p99 from POST to the first frame of the turn on the stream, and CPU
seconds per turn of the ``sa serve`` processes (and of those plus PostgreSQL's). PostgreSQL is
a throwaway cluster started from the server binaries (see ``tests/pgcluster.py``).

Each thread first answers ``--warmup`` turns (default 1) that are not counted: a thread's first
turn and a worker's first use of each of its database connections (PostgreSQL: opening it,
authenticating, preparing each statement) are one-time costs, not the cost of a turn. CPU is
user + system time from ``/proc``, taken when every thread is connected and warmed up and again
when the last measured turn is answered, divided by the measured turns: for ``sa serve``, its
process and every worker process; for PostgreSQL, the postmaster and every process under it
(the backends serving the workers' connections, the WAL writer, checkpointer, ...) plus the
CPU of backends that exited meanwhile (the postmaster's reaped children, ``cutime +
cstime``). ``--profile DIR`` runs each single-worker ``sa serve`` under cProfile (CPU time)
and writes ``DIR/<config>.prof``.

``--pin`` keeps a single-worker ``sa serve`` on CPU 0 and everything else (this client, the
model server, PostgreSQL) on the other CPUs. Unpinned, the scheduler sometimes puts a
PostgreSQL backend on the server's CPU and sometimes not, and the CPU per turn of the same code
varies by a third from run to run; pinned, both stores' runs see the same placement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from pgcluster import Cluster, start_cluster, wait_port  # noqa: E402
from serve_process import free_port  # noqa: E402

PACK = """
import os
from sa_core import Pack, define_agent, define_model, define_prompt

model = define_model(name="m", provider="openai_compatible", model="fake",
                     provider_options={"base_url": os.environ["SCALE_MODEL_URL"]})
prompt = define_prompt(name="main", model="m", prompt="Answer.", include_chat=True)
pack = Pack(name="scale", agents=[define_agent(name="helper", side_a={"prompt": "main"})],
            prompts=[prompt], models=[model])
"""

MODEL = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello "}}]},
                  {"choices": [{"index": 0, "delta": {"content": "there."}}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        if not body.get("stream"):
            data = json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
                "message": {"role": "assistant", "content": "Hello there."},
                "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        kind = "text/event-stream" if body.get("stream") else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the default backlog of 5 stalls some of 200 concurrent clients
    daemon_threads = True

server = Server(("127.0.0.1", int(sys.argv[1])), Handler)
server.serve_forever()
'''

PROFILER = """
import cProfile, runpy, sys, time
out = sys.argv.pop(1)
profiler = cProfile.Profile(time.process_time)  # CPU time, not time spent waiting
profiler.enable()
try:
    runpy.run_module("sa_core.cli", run_name="__main__", alter_sys=True)
finally:
    profiler.disable()
    profiler.dump_stats(out)
"""

API = "/api/packages/scale"
ALL_CPUS: set[int] = set()
SERVER_CPUS: set[int] = set()
"""With ``--pin``: the CPU of a single-worker ``sa serve`` (the rest run elsewhere)."""


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the processes, in seconds (0 for gone ones)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU of a process, every live descendant and every child it has reaped (seconds)."""
    try:
        fields = Path(f"/proc/{root}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    reaped = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return cpu_seconds(descendants(root)) + reaped


def descendants(root: int) -> list[int]:
    """The process and every descendant of it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def postmaster_pid(cluster: Cluster) -> int:
    return int((cluster.data / "postmaster.pid").read_text().split()[0])


async def run_config(
    db: str,
    workers: int,
    threads: int,
    turns: int,
    warmup: int,
    env: dict[str, str],
    tmp: Path,
    pg_root: int | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    async def key() -> str:
        from sa_core.store import open_store

        async with await open_store(db) as store:
            return (await store.create_api_key("bench"))[0]

    token = await key()
    port = free_port()
    python = [sys.executable, "-m", "sa_core.cli"]
    if profile is not None and workers == 1:
        (tmp / "profiler.py").write_text(PROFILER)
        python = [sys.executable, str(tmp / "profiler.py"), str(profile)]
    command = [*python, "serve", "--port", str(port), "--db", db,
               "--pack", str(tmp / "scale_pack.py"), "--log-level", "warning"]
    if workers > 1:
        command += ["--workers", str(workers)]
    log = open(tmp / f"serve-{port}.log", "w")  # noqa: SIM115
    server = subprocess.Popen(command, cwd=tmp, env={**os.environ, **env},
                              stdout=log, stderr=subprocess.STDOUT)
    if SERVER_CPUS:  # ``--pin``: the server's CPU (several workers keep every CPU)
        os.sched_setaffinity(server.pid, SERVER_CPUS if workers == 1 else ALL_CPUS)
    try:
        wait_port(port, 120)
        limits = httpx.Limits(
            max_connections=threads * 2 + 20, max_keepalive_connections=threads * 2
        )
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits,
                                     headers={"Authorization": f"Bearer {token}"},
                                     timeout=httpx.Timeout(120)) as client, httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            limits=httpx.Limits(max_connections=threads + 10, max_keepalive_connections=0),
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(120),
        ) as poster:  # POSTs on fresh connections: idle keep-alive ones are closed by uvicorn
            for _ in range(600):  # every worker up
                try:
                    if (await client.get("/schema/openapi.json")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            await asyncio.sleep(2 if workers > 1 else 0)
            ids = [
                (await client.post(f"{API}/threads", json={"agent": "helper"})).json()["id"]
                for _ in range(threads)
            ]
            latencies: list[float] = []
            ready = asyncio.Barrier(threads + 1)
            go = asyncio.Event()
            pids = descendants(server.pid)

            async def answered(lines: AsyncIterator[str], thread_id: str, turn: int) -> float:
                """Post a message; the seconds to the turn's first frame, once it is answered."""
                posted = time.perf_counter()
                await poster.post(f"{API}/threads/{thread_id}/messages",
                                  json={"content": f"turn {turn}"})
                first = None
                async for line in lines:
                    if not line.startswith("data:"):
                        continue
                    if first is None:
                        first = time.perf_counter() - posted
                    frame = json.loads(line[5:])
                    data = frame.get("data") or {}
                    if (frame["type"] == "message_data" and data.get("role") == "assistant"
                            and data.get("status") == "completed"):
                        break
                return first or 0.0

            async def one_thread(thread_id: str) -> None:
                async with client.stream("GET", f"{API}/threads/{thread_id}/stream") as response:
                    lines = response.aiter_lines()
                    async for line in lines:
                        if line.startswith("data:"):
                            break  # connected
                    for turn in range(warmup):
                        await answered(lines, thread_id, turn)
                    await ready.wait()
                    await go.wait()
                    for turn in range(warmup, warmup + turns):
                        latencies.append(await answered(lines, thread_id, turn))

            tasks = [asyncio.create_task(one_thread(t)) for t in ids]
            async with asyncio.timeout(120 + 60 * warmup):
                await ready.wait()  # every stream connected, every warm-up turn answered
            cpu_start = cpu_seconds(pids)
            pg_start = tree_cpu_seconds(pg_root) if pg_root else 0.0
            started = time.perf_counter()
            go.set()
            try:
                async with asyncio.timeout(float(os.environ.get("SCALE_TIMEOUT", "300"))):
                    await asyncio.gather(*tasks)
            except TimeoutError:
                stuck = [t for t, task in zip(ids, tasks, strict=True) if not task.done()]
                for thread_id in stuck[:3]:
                    page = (await client.get(f"{API}/threads/{thread_id}/messages")).json()
                    print(thread_id, [(m["role"], m["content"], m["status"])
                                      for m in page["messages"]], file=sys.stderr)
                raise SystemExit(
                    f"{workers} workers on {db.split(':')[0]}: only {len(latencies)} of "
                    f"{threads * turns} turns answered in time (server log: {log.name})"
                ) from None
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(pids) - cpu_start
            pg_cpu = tree_cpu_seconds(pg_root) - pg_start if pg_root else 0.0
        latencies.sort()
        done = threads * turns
        return {
            "turns_per_s": done / elapsed,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
            "cpu_ms_per_turn": cpu / done * 1000,
            "pg_ms_per_turn": pg_cpu / done * 1000,
            "pids": pids,
        }
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def print_medians(figures: dict[str, list[tuple[float, float]]]) -> None:
    """Medians of the alternated rounds, and of each round's ratio to the first configuration.

    A round's ratio compares two runs minutes apart, so the machine's drift between rounds
    (its speed moved by up to 2x on the shared benchmark machine) cancels out of it.
    """
    runs = {config: rounds for config, rounds in figures.items() if rounds}
    if not runs:
        return
    base = next(iter(runs.values()))
    print(f"medians of {len(base)} alternated rounds")
    print(f"{'config':<14}{'CPU ms/turn':>13}{'+postgres':>11}{'ratio':>8}{'ratio (+pg)':>13}")
    for config, rounds in runs.items():
        pairs = list(zip(rounds, base, strict=False))
        serve = statistics.median(s for s, _ in rounds)
        total = statistics.median(t for _, t in rounds)
        ratio = statistics.median(s / b for (s, _), (b, _) in pairs)
        ratio_total = statistics.median(t / b for (_, t), (_, b) in pairs)
        print(f"{config:<14}{serve:>13.2f}{total:>11.2f}{ratio:>8.2f}{ratio_total:>13.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1,
                        help="turns per thread answered before the measured ones (not counted)")
    parser.add_argument("--configs", default="sqlite:1,pg:1,pg:2,pg:4")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the configurations this many times, alternating, and print "
                             "the medians of CPU per turn")
    parser.add_argument("--profile", type=Path, help="write cProfile output of 1-worker runs here")
    parser.add_argument("--pin", action="store_true",
                        help="a 1-worker server on CPU 0, everything else on the other CPUs")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) > 1:  # before any child starts: they inherit the client's CPUs
        ALL_CPUS.update(cpus)
        SERVER_CPUS.add(cpus[0])
        os.sched_setaffinity(0, set(cpus[1:]))
    tmp = Path(tempfile.mkdtemp(prefix="sa-scale-"))
    (tmp / "scale_pack.py").write_text(PACK)
    model_port = free_port()
    (tmp / "model.py").write_text(MODEL)
    model = subprocess.Popen([sys.executable, str(tmp / "model.py"), str(model_port)])
    wait_port(model_port)
    env = {"SCALE_MODEL_URL": f"http://127.0.0.1:{model_port}/v1"}
    cluster = start_cluster() if "pg:" in args.configs else None
    pinned = f", sa serve (1 worker) on CPU {cpus[0]}, the rest elsewhere" if SERVER_CPUS else ""
    print(f"{args.threads} concurrent threads x {args.turns} turns (after {args.warmup} warm-up "
          f"turns each), over HTTP on loopback, {os.cpu_count()} CPUs{pinned}")
    print(f"{'config':<14}{'turns/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU ms/turn':>13}"
          f"{'+postgres':>11}")
    configs = args.configs.split(",")
    figures: dict[str, list[tuple[float, float]]] = {config: [] for config in configs}
    try:
        for index, config in enumerate(configs * args.repeat):  # rounds alternate the configs
            kind, workers = config.split(":")
            if kind == "sqlite":
                db = f"sqlite:///{tmp / f'scale{index}.db'}"
            else:
                assert cluster is not None
                subprocess.run([str(cluster.bindir / "psql"), cluster.url(), "-qc",
                                f"CREATE DATABASE scale{index}"], check=True)
                db = cluster.url(f"scale{index}")
            profile = None
            if args.profile is not None:
                args.profile.mkdir(parents=True, exist_ok=True)
                profile = args.profile.resolve() / f"{config.replace(':', '-')}-{index}.prof"
            pg_root = postmaster_pid(cluster) if kind == "pg" and cluster else None
            try:
                result = await run_config(db, int(workers), args.threads, args.turns,
                                          args.warmup, env, tmp, pg_root, profile)
            except SystemExit as stalled:  # report it and go on with the next configuration
                print(f"{config:<14}{stalled}", flush=True)
                continue
            total = result["cpu_ms_per_turn"] + result["pg_ms_per_turn"]
            figures[config].append((result["cpu_ms_per_turn"], total))
            print(f"{config:<14}{result['turns_per_s']:>9.1f}{result['p50_ms']:>9.0f}"
                  f"{result['p99_ms']:>9.0f}{result['cpu_ms_per_turn']:>13.2f}{total:>11.2f}",
                  flush=True)
        if args.repeat > 1:
            print_medians(figures)
    finally:
        model.terminate()
        model.wait()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    asyncio.run(main())
