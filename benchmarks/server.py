"""``sa serve --test-provider`` over loopback HTTP: throughput, first-frame latency, CPU, RSS.

Run: ``python benchmarks/server.py [--short]``. Starts ``sa serve --test-provider`` (one worker,
a fresh SQLite file, ``--log-level warning`` so no access log is written) on a free loopback
port, and drives it with a minimal keep-alive HTTP/1.1 client in this process. Each simulated
user owns one thread with its server-sent-event stream open, posts a message, and waits on the
stream for the stored answer (a completed ``assistant`` ``message_data`` frame) before posting
the next. Printed:

- turns per second with 200 concurrent threads (target >= 400);
- POST -> first stream frame p50 / p99 at 20 concurrent threads (target p50 <= 5 ms), and at
  200;
- server CPU (user + system, from ``/proc``) per turn in the throughput run;
- server RSS at the start, the peak and the end of a bounded load run (steady is the goal;
  ``--load-seconds 600`` for a ten-minute run); RSS climbs while the store's history cache
  and the kept conversions fill (50,000 messages each at most), then stays flat;
- users whose stream the server ended early (``slow_consumer``): they stop instead of waiting.

On a machine with two or more cores the server is pinned to one core and this client to
another (``os.sched_setaffinity``), so the figures measure the server, not the load generator
competing with it for a core. ``SA_BENCH_PROFILE=/path/server.prof`` runs the server under
cProfile and writes its profile there when it stops (the figures are then not comparable).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import parse_args, percentile  # noqa: E402
from serve_process import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
PACKAGE = "bench"


class Connection:
    """One keep-alive HTTP/1.1 connection (just enough HTTP for this benchmark)."""

    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.key = key
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    def close(self) -> None:
        self.writer.close()

    def send(self, method: str, path: str, body: Any = None) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self.writer.write(head.encode() + payload)

    async def head(self) -> tuple[int, dict[str, str]]:
        status = int((await self.reader.readline()).split()[1])
        headers = {}
        while True:
            line = (await self.reader.readline()).strip()
            if not line:
                return status, headers
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        self.send(method, path, body)
        status, headers = await self.head()
        if headers.get("transfer-encoding") == "chunked":
            data = b""
            while chunk := await self.chunk():
                data += chunk
        else:
            data = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, json.loads(data) if data else None

    async def chunk(self) -> bytes:
        size = int((await self.reader.readline()).strip(), 16)
        data = await self.reader.readexactly(size + 2)
        return data[:-2]


class StreamEnded(Exception):
    """The server ended a thread's stream (e.g. ``slow_consumer``): that user stops."""


class Stream:
    """A thread's server-sent-event stream, read frame by frame."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.buffer = b""

    async def open(self, thread_id: str) -> None:
        path = f"/api/packages/{PACKAGE}/threads/{thread_id}/stream"
        self.connection.send("GET", path)
        status, _ = await self.connection.head()
        assert status == 200, status
        frame = await self.frame()
        assert frame["type"] == "connected", frame

    async def frame(self) -> dict[str, Any]:
        while True:
            match = re.search(rb"\r?\n\r?\n", self.buffer)
            if match is not None:
                event, self.buffer = self.buffer[: match.start()], self.buffer[match.end() :]
                data = [
                    line[5:].strip()
                    for line in re.split(rb"\r?\n", event)
                    if line.startswith(b"data:")
                ]
                if data:
                    frame = dict(json.loads(b"\n".join(data)))
                    if frame.get("type") == "error":
                        raise StreamEnded(frame)
                    return frame
                continue
            chunk = await self.connection.chunk()
            if not chunk:  # the last chunk of the response: waiting on would hang forever
                raise StreamEnded("the stream ended without an error frame")
            self.buffer += chunk


def answered(frame: dict[str, Any]) -> bool:
    """Whether a frame is the stored answer that ends a turn."""
    data = frame.get("data")
    return (
        frame.get("type") == "message_data"
        and isinstance(data, dict)
        and data.get("role") == "assistant"
        and data.get("status") not in ("pending", None)
    )


STALL_SECONDS = 30.0
"""A user that gets no frame for this long while it waits for an answer stops (``stalled``)."""


class Stalled(Exception):
    """No frame came for ``STALL_SECONDS`` while a user waited for its answer."""


def _post(api: Connection, path: str, text: str) -> asyncio.Future[tuple[int, dict[str, str]]]:
    api.send("POST", path, {"content": text})
    return asyncio.ensure_future(api.head())


async def post_and_wait(api: Connection, stream: Stream, path: str, text: str) -> float:
    """POST a message, wait for its answer on the stream; ms to the first frame.

    uvicorn closes a keep-alive connection after 5 idle seconds. When that close crosses the
    POST (the response fails before its status line: a reset, or the end of the stream), the
    server never read the request, so it is sent again, once, on a new connection, as HTTP
    clients do for a request on a stale kept-alive connection.
    """
    if api.reader.at_eof():  # the server closed the idle keep-alive connection (uvicorn: 5 s)
        api.close()
        await api.open()
    start = time.perf_counter()
    response = _post(api, path, text)
    resent = False
    first: float | None = None
    frame_read: asyncio.Future[dict[str, Any]] | None = None
    seen: list[str] = []
    while True:
        if frame_read is None:
            frame_read = asyncio.ensure_future(stream.frame())
        waiting: set[asyncio.Future[Any]] = {frame_read}
        if not response.done():
            waiting.add(response)
        done, _ = await asyncio.wait(
            waiting, timeout=STALL_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            posted: object = "no response"
            if response.done():
                posted = response.exception() or response.result()[0]
            response.cancel()
            frame_read.cancel()
            raise Stalled(f"POST answered {posted}; frames of the turn: {seen}")
        if response in done and response.exception() is not None and not resent:
            resent = True
            api.close()
            await api.open()
            response = _post(api, path, text)
            continue
        if frame_read not in done:
            continue
        frame, frame_read = frame_read.result(), None
        data = frame.get("data")
        role = data.get("role") if isinstance(data, dict) else None
        seen.append(f"{frame.get('type')}:{role}" if role else str(frame.get("type")))
        if first is None:
            first = (time.perf_counter() - start) * 1000
        if answered(frame):
            break
    status, headers = await response
    assert status == 202, status
    await api.reader.readexactly(int(headers.get("content-length", "0")))
    return first


async def simulate(
    port: int, key: str, users: int, seconds: float, pid: int
) -> dict[str, Any]:
    """``users`` concurrent users for ``seconds`` once all are set up; the run's figures."""
    first_frames: list[float] = []
    counts: list[int] = []
    rss: list[float] = []
    cut_off: list[str] = []
    stalled: list[str] = []
    ready = asyncio.Event()
    prepared = 0
    stop = float("inf")

    async def one() -> None:
        nonlocal prepared
        api = await Connection(port, key).open()
        status, thread = await api.request(
            "POST", f"/api/packages/{PACKAGE}/threads", {"agent": "chatter"}
        )
        assert status == 201, (status, thread)
        stream = Stream(await Connection(port, key).open())
        await stream.open(thread["id"])
        path = f"/api/packages/{PACKAGE}/threads/{thread['id']}/messages"
        prepared += 1
        await ready.wait()
        turns = 0
        try:
            while time.perf_counter() < stop:
                first_frames.append(await post_and_wait(api, stream, path, f"message {turns}"))
                turns += 1
        except StreamEnded as exc:
            cut_off.append(str(exc))
        except Stalled as exc:
            stalled.append(str(exc))
        finally:
            api.close()
            stream.connection.close()
        counts.append(turns)

    tasks = [asyncio.ensure_future(one()) for _ in range(users)]
    while prepared < users:
        failed = [t for t in tasks if t.done() and t.exception() is not None]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
        await asyncio.sleep(0.02)
    cpu_before, rss_before = server_cpu(pid), server_rss(pid)
    loop_before = server_cpu(pid, loop_only=True)
    start = time.perf_counter()
    stop = start + seconds
    ready.set()
    running = asyncio.ensure_future(asyncio.gather(*tasks))
    while not running.done():
        rss.append(server_rss(pid))
        await asyncio.wait({running}, timeout=1.0)
    await running
    elapsed = time.perf_counter() - start
    turns = sum(counts)
    return {
        "turns": turns,
        "turns_per_s": turns / elapsed,
        "first_frames": first_frames,
        "cpu_per_turn_ms": (server_cpu(pid) - cpu_before) / max(turns, 1) * 1000,
        "loop_cpu_per_turn_ms": (server_cpu(pid, loop_only=True) - loop_before)
        / max(turns, 1)
        * 1000,
        "rss_start": rss_before,
        "rss_peak": max(rss, default=rss_before),
        "rss_end": server_rss(pid),
        "rss_series": rss,
        "cut_off": cut_off,
        "stalled": stalled,
    }


def server_cpu(pid: int, *, loop_only: bool = False) -> float:
    """Seconds of CPU (user + system) the process (or its event loop's thread) has used."""
    stat = f"/proc/{pid}/task/{pid}/stat" if loop_only else f"/proc/{pid}/stat"
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_rss(pid: int) -> float:
    """Resident set size of the process in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


CORES = sorted(os.sched_getaffinity(0))
"""The cores this benchmark may use, read once: :func:`pin` narrows the client's own set, and
a server started after that would otherwise inherit it (and share the client's core)."""


def pin(server_pid: int) -> str:
    """Pin the server to the first allowed core and this client to the others.

    Returns:
        How the processes were placed, for the printed report.
    """
    cores = CORES
    if len(cores) < 2:
        return f"not pinned (one core: {cores})"
    os.sched_setaffinity(server_pid, {cores[0]})
    os.sched_setaffinity(0, set(cores[1:]))
    return f"server on core {cores[0]}, client on {cores[1:]}"


class Served:
    """``sa serve --test-provider`` in a subprocess, with its first API key."""

    def __init__(self, database: Path) -> None:
        self.port = free_port()
        profile = os.environ.get("SA_BENCH_PROFILE")
        launcher = (
            [sys.executable, "-m", "cProfile", "-o", profile, "-m", "sa_core.cli"]
            if profile
            else [str(Path(sys.executable).with_name("sa"))]
        )
        command = [
            *launcher, "serve", "--test-provider",
            "--db", f"sqlite:///{database}", "--pack", str(HERE / "bench_pack.py"),
            "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.key = ""
        self.pinned = pin(self.process.pid)

    def start(self) -> Served:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("    ") and line.strip():
                self.key = line.strip()
            if line.startswith("Serving packages"):
                break
        else:
            raise RuntimeError(f"sa serve exited with {self.process.wait()}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sa serve did not start listening within 30 s")

    def stop(self) -> None:
        # SIGINT: uvicorn shuts down cleanly, so a profiled server writes its profile
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def main() -> None:
    """Print throughput, latency, CPU and RSS."""
    args = parse_args(__doc__ or "")
    latency_seconds, load_seconds = (3.0, 8.0) if args.short else (10.0, 40.0)
    load_seconds = args.load_seconds or load_seconds
    rounds = args.rounds or (1 if args.short else 3)
    latency: list[dict[str, Any]] = []
    load: list[dict[str, Any]] = []
    placement = ""
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(rounds):
            served = Served(Path(tmp) / f"server-{index}.db").start()
            placement = served.pinned
            try:
                pid = served.process.pid
                port, key = served.port, served.key
                latency.append(asyncio.run(simulate(port, key, 20, latency_seconds, pid)))
                load.append(asyncio.run(simulate(port, key, 200, load_seconds, pid)))
            finally:
                served.stop()
    p50 = [statistics.median(r["first_frames"]) for r in latency]
    p99 = [percentile(r["first_frames"], 0.99) for r in latency]
    print(
        f"sa serve --test-provider (one worker, loopback HTTP, SQLite; median of {rounds} rounds;"
        f" {placement}):"
    )
    print(f"  200 concurrent threads: {statistics.median(r['turns_per_s'] for r in load):.0f} "
          f"turns/s ({[round(r['turns_per_s']) for r in load]}); target >= 400")
    print(f"  POST -> first stream frame at 20 threads: p50 {statistics.median(p50):.2f} ms, "
          f"p99 {statistics.median(p99):.2f} ms; target p50 <= 5 ms")
    print(f"  20 threads: {statistics.median(r['turns_per_s'] for r in latency):.0f} turns/s")
    loaded50 = statistics.median(statistics.median(r["first_frames"]) for r in load)
    loaded99 = statistics.median(percentile(r["first_frames"], 0.99) for r in load)
    print(f"  POST -> first stream frame at 200 threads: p50 {loaded50:.2f} ms, p99 "
          f"{loaded99:.2f} ms (the p99 holds the first turns, all 200 posted at once)")
    cpu_per_turn = statistics.median(r["cpu_per_turn_ms"] for r in load)
    print(f"  server CPU per turn (200 threads): {cpu_per_turn:.2f} ms, so one free core "
          f"could serve about {1000 / cpu_per_turn:.0f} turns/s")
    loop_cpu = statistics.median(r["loop_cpu_per_turn_ms"] for r in load)
    print(f"  of which the event loop's thread: {loop_cpu:.2f} ms per turn")
    last = load[-1]
    print(f"  server RSS over the last {load_seconds:.0f} s load run ({last['turns']} turns): "
          f"start {last['rss_start']:.0f} MiB, peak {last['rss_peak']:.0f} MiB, "
          f"end {last['rss_end']:.0f} MiB")
    ended = [reason for r in load + latency for reason in r["cut_off"]]
    print(f"  users whose stream the server ended early: {len(ended)}"
          + (f" (first: {ended[0]})" if ended else ""))
    stalled = [reason for r in load + latency for reason in r["stalled"]]
    print(f"  users that got no frame for {STALL_SECONDS:.0f} s while waiting (stalled): "
          f"{len(stalled)}" + (f" (first: {stalled[0]})" if stalled else ""))
    series = last["rss_series"]
    step = max(1, len(series) // 12)
    print("  RSS samples (MiB): " + ", ".join(f"{v:.0f}" for v in series[::step]))
    if len(series) >= 120:  # a long run: RSS at each minute (samples are one second apart)
        minutes = ", ".join(f"{i // 60} min {v:.0f}" for i, v in enumerate(series) if i % 60 == 0)
        print(f"  RSS each minute (MiB): {minutes}, end {last['rss_end']:.0f}")


if __name__ == "__main__":
    main()
