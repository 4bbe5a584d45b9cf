"""The crash harness: kill ``sa serve`` with SIGKILL under load, restart it, count what broke.

Concurrent HTTP clients (httpx) each drive one parent thread of the crash pack with messages
``job <id> <kind>`` (see :mod:`crashpack`). The harness kills the server at random moments
(a seeded random delay, or right after a client receives a 202 for every third kill), restarts
it on the same database, and goes on. At the end it restarts once more, lets everything settle,
stops the server cleanly and compares three sources: what the clients saw acknowledged, what
the tools and effects recorded in the ledger, and what the runtime's database holds.

Counted (each should be 0):

* ``unanswered``: messages acknowledged with 202 that never got their ``done`` reply;
* ``tools_rerun``: tool executions that started after a result for the same tool call was
  already stored (a tool interrupted before its result was stored may run once more: that is
  reported as ``interrupted_tools_rerun``, for information);
* ``duplicate_children``: extra child threads for one subagent tool call;
* ``queue_lost`` / ``queue_doubled``: queued notes (and subagent results queued to the parent)
  never stored, or stored more than once;
* ``blocking_failed_child_ok``: blocking subagent calls whose result is a failure while their
  child's session ended successfully (the call stopped waiting before the child finished);
* ``blocking_results_twice``: blocking children whose result reached the parent more than once
  (a tool result and a notification, or two of either). Blocking calls answered with their
  child's real result are reported as ``blocking_answered_with_child_result``, for information;
* ``effects_lost`` / ``effects_doubled``: scheduled effects that never finished, or finished
  (or were scheduled) more than once. An effect may run again when the kill came between the end
  of its body and the commit of its completion (at-least-once for an interrupted run): a second
  run after a kill within :data:`COMMIT_WINDOW_US` of the first run's end is reported as
  ``effects_rerun_after_finish``, for information. An effect whose two runs a kill each cut
  off is marked failed by the engine (at most twice in all, see ``docs/architecture.md``): it
  is reported as ``effects_given_up``, for information, only when the ledger shows both runs
  starting and a kill after each; any other effect that never finished is lost.

With ``workers`` (``--workers N``) the run uses N ``sa serve`` workers on one PostgreSQL
database (a throwaway cluster from ``tests/pgcluster.py`` unless a URL is given) instead of one
server on SQLite: the clients spread over the workers, each kill SIGKILLs a worker that holds a
thread's lease (one running turns), the other workers must take its threads over and finish
them, and the killed worker is restarted before the next kill. The counts are the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from crashpack import ledger
from sa_core.engine.delivery.effects import MAX_EFFECT_ATTEMPTS
from sa_core.store.effects import INTERRUPTED_EFFECT as INTERRUPTED

TESTS_DIR = Path(__file__).resolve().parents[1]
PACK_DIR = Path(__file__).resolve().parent
SITE_DIR = PACK_DIR / "site"
KINDS = ("tool", "block", "bg", "note", "effect")
PACKAGE = "/api/packages/crash"

COMMIT_WINDOW_US = 500_000
"""How soon after an effect's body ends its completion must be committed (0.5 s)."""

MUST_BE_ZERO = (
    "unanswered",
    "tools_rerun",
    "duplicate_children",
    "queue_lost",
    "queue_doubled",
    "blocking_failed_child_ok",
    "blocking_results_twice",
    "effects_lost",
    "effects_doubled",
)
"""The counts the engine's durability guarantees must keep at zero."""


@dataclass
class Settings:
    """How a crash run goes.

    Args:
        kills: SIGKILLs to deliver.
        seed: seeds the job kinds and the kill delays.
        clients: concurrent HTTP clients, one parent thread each.
        min_delay: shortest random time between a start and its kill, in seconds.
        max_delay: longest such time.
        aimed_every: every n-th kill comes right after a client's 202 (0: never).
        settle_timeout: seconds the last server may go without progress (no new message,
            execution record or effect run) while it still owes work before the run stops
            waiting; the wait itself lasts as long as progress continues, at most ten times
            this.
        workdir: where the database, ledger and server logs go.
    """

    kills: int
    seed: int
    workdir: Path
    clients: int = 4
    min_delay: float = 0.2
    max_delay: float = 1.5
    aimed_every: int = 3
    settle_timeout: float = 60.0
    workers: int = 0
    """0: one server on SQLite; N (at least 2): N workers on one PostgreSQL database."""
    database_url: str | None = None
    """The PostgreSQL database of the workers (default: a throwaway cluster)."""
    lease_seconds: float = 2.0
    """The workers' lease expiry: how soon a killed worker's threads are taken over."""
    duration: float = 30.0
    """With no kills (``kills=0``): seconds of traffic before the run settles and counts."""


@dataclass
class Report:
    """What a crash run found."""

    seed: int
    kills: int = 0
    aimed_kills: int = 0
    workers: int = 0
    lease_holder_kills: int = 0
    jobs_sent: int = 0
    acked: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    info: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    settled: bool = False
    unsettled: str = ""
    seconds: float = 0.0

    def format(self) -> str:
        """The report as printable lines."""
        lines = [
            f"crash run: seed={self.seed} workers={self.workers or 1} kills={self.kills} "
            "(aimed after a 202: "
            f"{self.aimed_kills}"
            + (f", holding a lease: {self.lease_holder_kills}" if self.workers else "")
            + f") jobs sent={self.jobs_sent} acknowledged={self.acked} "
            f"settled={self.settled} in {self.seconds:.1f}s",
        ]
        if not self.settled:
            lines.append(
                "  NOT SETTLED: the last server stopped making progress with work still owed ("
                f"{self.unsettled or 'the run ended before settling'}); what it still owed is "
                "counted below as unanswered or lost"
            )
        for name in MUST_BE_ZERO:
            lines.append(f"  {name:<28} {self.counts.get(name, 0):>6}")
        for name, value in sorted(self.info.items()):
            lines.append(f"  ({name:<26} {value:>6})")
        for name, items in sorted(self.examples.items()):
            if items:
                lines.append(f"  e.g. {name}: {', '.join(items[:3])}")
        return "\n".join(lines)


# -- the server ---------------------------------------------------------------------------


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``sa serve`` on the crash pack, as a subprocess on 127.0.0.1.

    Args:
        workdir: Where the database (SQLite), the ledger and the logs go.
        database_url: A shared PostgreSQL database (a worker), or ``None`` for SQLite.
        name: Names this server's log files.
        lease_seconds: The worker's lease expiry (PostgreSQL only).
    """

    def __init__(
        self,
        workdir: Path,
        database_url: str | None = None,
        name: str = "server",
        lease_seconds: float = 2.0,
    ) -> None:
        self.workdir = workdir
        self.db_path = workdir / "sa.db"
        self.database_url = database_url or f"sqlite:///{self.db_path}"
        self.name = name
        self.lease_seconds = lease_seconds
        self.ledger_path = workdir / "ledger.db"
        self.process: subprocess.Popen[bytes] | None = None
        self.token: str | None = None
        self.base_url: str | None = None
        self.starts = 0
        self.start_seconds: list[float] = []

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(SITE_DIR), str(TESTS_DIR)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["CRASH_LEDGER"] = str(self.ledger_path)
        env["CRASH_DATABASE"] = self.database_url
        return env

    async def start(self, timeout: float = 60.0) -> str:
        """Start the server and wait until it answers; returns its base URL."""
        port = free_port()
        self.starts += 1
        began = time.monotonic()
        log_path = self.workdir / f"{self.name}-{self.starts}.log"
        command = [
            sys.executable,
            "-m",
            "sa_core.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--db",
            self.database_url,
            "--pack",
            str(PACK_DIR),
            "--log-level",
            "warning",
        ]
        if self.database_url.startswith("postgresql"):
            command += ["--lease-seconds", str(self.lease_seconds)]
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.workdir,
                start_new_session=True,
            )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"sa serve exited with {self.process.returncode}; see {log_path}:\n"
                        + log_path.read_text(errors="replace")[-2000:]
                    )
                if self.token is None:
                    self.token = _first_key(log_path)
                if self.token is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        response = await client.get(f"{base}/api/packages", headers=self.headers)
                        if response.status_code == 200:
                            self.base_url = base
                            self.start_seconds.append(time.monotonic() - began)
                            return base
                await asyncio.sleep(0.05)
        self.kill()
        raise RuntimeError(f"sa serve did not answer within {timeout}s; see {log_path}")

    @property
    def pid(self) -> int | None:
        """The running process's id."""
        return self.process.pid if self.process is not None else None

    @property
    def headers(self) -> dict[str, str]:
        """The authorisation header."""
        return {"Authorization": f"Bearer {self.token}"}

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        self.base_url = None
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait()
        self.process = None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server cleanly (SIGTERM), killing it if it hangs."""
        self.base_url = None
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None


def _first_key(log_path: Path) -> str | None:
    text = log_path.read_text(errors="replace")
    marker = "keep it safe:"
    if marker not in text:
        return None
    rest = text.split(marker, 1)[1].strip().split()
    return rest[0] if rest else None


# -- the clients --------------------------------------------------------------------------


@dataclass
class Load:
    """What the clients share with the kill loop."""

    servers: list[Server]
    epoch: int = 0
    sending: bool = True
    stopped: bool = False
    acked: list[tuple[str, str]] = field(default_factory=list)
    sent: int = 0
    acked_now: asyncio.Event = field(default_factory=asyncio.Event)
    kill_times_us: list[int] = field(default_factory=list)

    def server_for(self, index: int) -> Server | None:
        """The server client ``index`` talks to: its own worker, else any running one."""
        preferred = self.servers[index % len(self.servers)]
        if preferred.base_url is not None:
            return preferred
        return next((s for s in self.servers if s.base_url is not None), None)


async def _client(index: int, load: Load, rng: random.Random) -> None:
    thread_id: str | None = None
    number = 0
    async with httpx.AsyncClient(timeout=5.0) as http:
        while not load.stopped:
            server = load.server_for(index)
            base = server.base_url if server is not None else None
            if server is None or base is None or not load.sending:
                await asyncio.sleep(0.05)
                continue
            headers = server.headers
            try:
                if thread_id is None:
                    created = await http.post(
                        f"{base}{PACKAGE}/threads", json={"agent": "parent"}, headers=headers
                    )
                    if created.status_code == 201:
                        thread_id = str(created.json()["id"])
                    continue
                kind = rng.choice(KINDS)
                job = f"k{index}.{number}"
                number += 1
                load.sent += 1
                epoch = load.epoch
                response = await http.post(
                    f"{base}{PACKAGE}/threads/{thread_id}/messages",
                    json={"content": f"job {job} {kind}"},
                    headers=headers,
                )
            except httpx.HTTPError:
                await asyncio.sleep(0.05)
                continue
            if response.status_code != 202:
                continue
            expected = f"{job}~{kind}"
            load.acked.append((thread_id, expected))
            load.acked_now.set()
            await _await_answer(http, load, server, thread_id, expected, epoch)


async def _await_answer(
    http: httpx.AsyncClient, load: Load, server: Server, thread_id: str, job: str, epoch: int
) -> None:
    """Poll for ``done <job>`` until it comes, the server restarts, or 10 seconds pass."""
    deadline = time.monotonic() + 10
    while not load.stopped and load.epoch == epoch and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        base = server.base_url
        if base is None:
            return
        try:
            page = await http.get(
                f"{base}{PACKAGE}/threads/{thread_id}/messages",
                params={"order": "desc", "limit": 50},
                headers=server.headers,
            )
        except httpx.HTTPError:
            return
        if page.status_code == 200 and any(
            f"done {job}" in (m.get("content") or "").splitlines()
            for m in page.json()["messages"]
            if m.get("role") == "assistant"
        ):
            return


# -- the run ------------------------------------------------------------------------------


class Db:
    """Read-only queries on the run's database: the SQLite file, or the workers' PostgreSQL."""

    def __init__(self, url: str, sqlite_path: Path) -> None:
        self.url = url
        self.sqlite_path = sqlite_path
        self.postgres = url.startswith("postgresql")
        self._pg: Any = None
        self._sqlite: sqlite3.Connection | None = None

    def json(self, column: str, key: str) -> str:
        """SQL reading ``key`` of a JSON column as text."""
        if self.postgres:
            return f"({column}->>'{key}')"
        return f"json_extract({column}, '$.{key}')"

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Db]:
        """Run the block's queries on one connection."""
        if self.postgres:
            import asyncpg  # type: ignore[import-untyped]

            self._pg = await asyncpg.connect(self.url)
            try:
                yield self
            finally:
                await self._pg.close()
                self._pg = None
        else:
            with _database(self.sqlite_path) as connection:
                self._sqlite = connection
                try:
                    yield self
                finally:
                    self._sqlite = None

    async def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Every row of a query (inside :meth:`session`)."""
        if self._pg is not None:
            return [tuple(row) for row in await self._pg.fetch(sql)]
        assert self._sqlite is not None, "query outside Db.session()"
        return list(self._sqlite.execute(sql).fetchall())

    async def one(self, sql: str) -> tuple[Any, ...]:
        """The first row of a query."""
        return (await self.rows(sql))[0]


async def run(settings: Settings) -> Report:
    """Run the crash test and count what broke (see the module docstring)."""
    if settings.workers and settings.database_url is None:
        from pgcluster import running_cluster

        with running_cluster() as cluster:
            return await run(replace(settings, database_url=cluster.url()))
    started = time.monotonic()
    settings.workdir.mkdir(parents=True, exist_ok=True)
    if settings.workers:
        if settings.workers < 2:
            raise ValueError(f"workers={settings.workers}: give 0 (SQLite) or at least 2")
        servers = [
            Server(settings.workdir, settings.database_url, f"worker{i}", settings.lease_seconds)
            for i in range(settings.workers)
        ]
    else:
        servers = [Server(settings.workdir)]
    server = servers[0]
    db = Db(server.database_url, server.db_path)
    ledger.connect(str(server.ledger_path)).close()
    rng = random.Random(settings.seed)
    report = Report(seed=settings.seed, workers=settings.workers)
    load = Load(servers=servers)
    clients = [
        asyncio.create_task(_client(i, load, random.Random(rng.random())))
        for i in range(settings.clients)
    ]
    try:
        for kill in range(settings.kills):
            await _start_stopped(servers)
            aimed = settings.aimed_every > 0 and kill % settings.aimed_every == (
                settings.aimed_every - 1
            )
            if aimed:
                load.acked_now.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(load.acked_now.wait(), 10)
                report.aimed_kills += 1
            else:
                await asyncio.sleep(rng.uniform(settings.min_delay, settings.max_delay))
            victim = server
            if settings.workers:
                victim, holds = await _lease_holder(db, servers, rng)
                report.lease_holder_kills += holds
            load.kill_times_us.append(time.time_ns() // 1000)
            victim.kill()
            load.epoch += 1
            report.kills += 1
        if settings.kills == 0:  # traffic without kills, for as long as asked
            await _start_stopped(servers)
            await asyncio.sleep(settings.duration)
        load.sending = False
        await _start_stopped(servers)
        unsettled = await _settle(db, load, settings.settle_timeout)
        report.settled = unsettled is None
        report.unsettled = unsettled.describe() if unsettled is not None else ""
    finally:
        load.stopped = True
        for task in clients:
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)
        for each in servers:
            each.stop()
    report.jobs_sent = load.sent
    start_seconds = [seconds for each in servers for seconds in each.start_seconds]
    if start_seconds:
        mean = sum(start_seconds) / len(start_seconds)
        report.info["server_start_ms_mean"] = round(mean * 1000)
    report.acked = len(load.acked)
    async with db.session():
        await _count(db, server.ledger_path, load, report)
    report.seconds = time.monotonic() - started
    return report


async def _start_stopped(servers: list[Server]) -> None:
    """Start every server not running (one at a time: the first prints the API key)."""
    for each in servers:
        if each.process is None:
            each.token = each.token or servers[0].token
            await each.start()


async def _lease_holder(db: Db, servers: list[Server], rng: random.Random) -> tuple[Server, int]:
    """A worker running turns (holding a thread's lease), waiting up to 2 s for one.

    Returns:
        The worker to kill, and 1 when it holds a lease (0: none did, a random worker).
    """
    deadline = time.monotonic() + 2
    while True:
        now = time.time_ns() // 1000
        async with db.session():
            owners = await db.rows(f"SELECT owner FROM thread_leases WHERE expires_at > {now}")
        pids = {int(owner.split(":")[-2]) for (owner,) in owners}
        holders = [each for each in servers if each.pid in pids]
        if holders:
            return rng.choice(holders), 1
        if time.monotonic() > deadline:
            return rng.choice(servers), 0
        await asyncio.sleep(0.05)


@dataclass
class Pending:
    """Work the database still shows as owed after the last restart."""

    owed: list[str]
    queue: int
    effects: int
    executions: int

    @property
    def busy(self) -> bool:
        """Whether the runtime still has work it will do on its own."""
        return bool(self.queue or self.effects or self.executions)

    def describe(self) -> str:
        """One line for the report."""
        return (
            f"{len(self.owed)} acknowledged jobs unanswered, {self.queue} queue entries, "
            f"{self.effects} effects pending or running, {self.executions} threads owing a turn"
        )


async def _pending(db: Db, load: Load) -> tuple[Pending, tuple[object, ...]]:
    """What is still owed, and a fingerprint of the database that changes with any progress."""
    async with db.session():
        (queue,) = await db.one("SELECT COUNT(*) FROM queue")
        (effects,) = await db.one(
            "SELECT COUNT(*) FROM effects WHERE status IN ('pending', 'processing')"
        )
        # owed or running: a restarted server, or a worker taking over, resumes them
        (executions,) = await db.one(
            "SELECT COUNT(*) FROM executions WHERE status IN ('owed', 'running')"
        )
        answers = await _answers(db)
        fingerprint = (
            *await db.one("SELECT COUNT(*), MAX(seq) FROM messages"),
            *await db.one("SELECT COUNT(*), MAX(updated_at) FROM executions"),
            *await db.one("SELECT COUNT(*), MAX(started_at), MAX(finished_at) FROM effects"),
            queue,
        )
    owed = [job for thread, job in load.acked if job not in answers.get(thread, set())]
    return Pending(owed, queue, effects, executions), fingerprint


async def _settle(db: Db, load: Load, stall: float, quiet: float = 4.0) -> Pending | None:
    """Wait until every acknowledged job is answered and nothing is owed; None when it is so.

    The wait adapts to the machine: it goes on as long as the database shows progress (new
    messages, execution records, effect runs) and gives up once it has shown none for
    ``stall`` seconds while work is still pending (queue entries, pending or running effects,
    threads owing a turn), or for ``quiet`` seconds while nothing is pending (what is still
    owed then will never come). Returns what was still owed when it gave up.
    """
    last_change, last_seen = time.monotonic(), None
    deadline = time.monotonic() + 10 * stall
    while True:
        await asyncio.sleep(0.25)
        pending, seen = await _pending(db, load)
        if not pending.owed and not pending.busy:
            return None
        if seen != last_seen:
            last_change, last_seen = time.monotonic(), seen
        elif time.monotonic() - last_change > (stall if pending.busy else quiet):
            return pending
        if time.monotonic() > deadline:
            return pending


@contextlib.contextmanager
def _database(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        yield connection
    finally:
        connection.close()


async def _answers(db: Db) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    rows = await db.rows(
        "SELECT thread_id, content FROM messages WHERE role = 'assistant' AND content LIKE 'done %'"
    )
    for thread_id, content in rows:  # one line "done <job>" per job a response answers
        for line in content.splitlines():
            if line.startswith("done "):
                found[thread_id].add(line[len("done ") :])
    return found


async def _count(db: Db, ledger_path: Path, load: Load, report: Report) -> None:
    entries = ledger.read(str(ledger_path))
    answers = await _answers(db)
    tool_rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for thread_id, call_id, created in await db.rows(
        "SELECT thread_id, tool_call_id, created_at FROM messages WHERE role = 'tool'"
    ):
        tool_rows[(thread_id, call_id)].append(created)
    children = await db.rows(
        "SELECT id, parent_id, created_at FROM threads WHERE parent_id IS NOT NULL"
    )
    first_user: dict[str, str] = {}
    for thread_id, content in await db.rows(
        "SELECT thread_id, content FROM messages WHERE role = 'user' ORDER BY seq"
    ):
        first_user.setdefault(thread_id, content or "")
    subagent_calls: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for thread_id, created, calls in await db.rows(
        "SELECT thread_id, created_at, tool_calls FROM messages "
        "WHERE role = 'assistant' AND tool_calls IS NOT NULL ORDER BY seq"
    ):
        for call in json.loads(calls) or []:
            name = (call.get("function") or {}).get("name") or call.get("name")
            if name in ("worker", "scout"):
                task = "blk" if name == "worker" else "bg"
                job = str(call.get("id", ""))[2:].rsplit("-", 1)[0]
                subagent_calls[thread_id].append((created, f"{task} {job}"))
    notes = Counter(
        (thread_id, content[len("note ") :])
        for thread_id, content in await db.rows(
            "SELECT thread_id, content FROM messages WHERE role = 'user' AND content LIKE 'note %'"
        )
    )
    results = Counter(
        (thread_id, meta_child)
        for thread_id, meta_child in await db.rows(
            f"SELECT thread_id, {db.json('meta', 'subagent_id')} FROM messages "
            f"WHERE {db.json('meta', 'subagent_event')} IN ('result', 'failure')"
        )
    )
    effect_rows = Counter(
        op
        for (op,) in await db.rows(
            f"SELECT {db.json('args', 'op')} FROM effects WHERE name = 'ledger_effect'"
        )
    )
    given_up_rows = {
        op
        for (op,) in await db.rows(
            f"SELECT {db.json('args', 'op')} FROM effects WHERE name = 'ledger_effect' "
            f"AND status = 'failed' AND error = '{INTERRUPTED}'"
        )
    }
    (queue_left,) = await db.one("SELECT COUNT(*) FROM queue")

    unanswered = [job for thread, job in load.acked if job not in answers.get(thread, set())]
    report.counts["unanswered"] = len(unanswered)
    report.examples["unanswered"] = unanswered

    rerun, interrupted_rerun = [], 0
    for entry in entries:
        if entry.event != "tool_start":
            continue
        stored = tool_rows.get((entry.thread_id, entry.call_id or ""), [])
        if any(created < entry.at_us for created in stored):
            rerun.append(entry.op)
        elif entry.attempt > 1:
            interrupted_rerun += 1
    report.counts["tools_rerun"] = len(rerun)
    report.examples["tools_rerun"] = rerun
    report.info["tool_executions"] = sum(1 for e in entries if e.event == "tool_start")
    report.info["interrupted_tools_rerun"] = interrupted_rerun

    tasks: dict[str, str] = {}
    for child_id, parent_id, created in children:
        first = first_user.get(child_id)
        if first is None:  # killed before its first message: the parent's latest subagent call
            earlier = [t for at, t in subagent_calls.get(parent_id, []) if at <= created]
            first = earlier[-1] if earlier else f"unattributed {child_id}"
        tasks[child_id] = first
    per_task = Counter(tasks.values())
    duplicates = {task: n for task, n in per_task.items() if n > 1}
    report.counts["duplicate_children"] = sum(n - 1 for n in duplicates.values())
    report.examples["duplicate_children"] = sorted(duplicates)
    report.info["child_threads"] = len(children)

    queued = {(e.thread_id, e.op) for e in entries if e.event == "note_queued"}
    expected_notes = queued | set(notes)
    notes_lost = [op for key in expected_notes if notes[key] == 0 for op in [key[1]]]
    notes_doubled = [key[1] for key in expected_notes if notes[key] > 1]
    background = [
        (parent_id, child_id)
        for child_id, parent_id, _ in children
        if tasks[child_id].startswith("bg ") and child_id in first_user
    ]
    results_lost = [child for parent, child in background if results[(parent, child)] == 0]
    results_doubled = [f"{child}" for (_, child), n in results.items() if n > 1]
    report.counts["queue_lost"] = len(notes_lost) + len(results_lost) + queue_left
    report.counts["queue_doubled"] = len(notes_doubled) + len(results_doubled)
    report.examples["queue_lost"] = notes_lost + results_lost
    report.examples["queue_doubled"] = notes_doubled + results_doubled
    report.info["notes_queued"] = len(expected_notes)
    report.info["background_results"] = len(background)

    scheduled = {e.op for e in entries if e.event == "effect_scheduled"} | set(effect_rows)
    finished = Counter(e.op for e in entries if e.event == "effect_end")
    starts = Counter(e.op for e in entries if e.event == "effect_start")
    ends: dict[str, list[int]] = defaultdict(list)
    start_times: dict[str, list[int]] = defaultdict(list)
    scheduled_at: dict[str, int] = {}
    for entry in entries:
        if entry.event == "effect_scheduled":
            scheduled_at.setdefault(entry.op, entry.at_us)
        elif entry.event == "effect_end":
            ends[entry.op].append(entry.at_us)
        elif entry.event == "effect_start":
            start_times[entry.op].append(entry.at_us)
    given_up = [
        op
        for op in scheduled
        if op in given_up_rows
        and finished[op] == 0
        and _killed_in_each_run(start_times[op], load.kill_times_us, scheduled_at.get(op, 0))
    ]
    effects_lost = [op for op in scheduled if finished[op] == 0 and op not in given_up]
    effects_doubled, rerun_after_finish = [], 0
    for op in scheduled:
        if effect_rows[op] > 1:
            effects_doubled.append(op)
        elif finished[op] > 1:
            first_end = min(ends[op])
            if any(0 <= k - first_end <= COMMIT_WINDOW_US for k in load.kill_times_us):
                rerun_after_finish += 1
            else:
                effects_doubled.append(op)
    report.counts["effects_lost"] = len(effects_lost)
    report.counts["effects_doubled"] = len(effects_doubled)
    report.examples["effects_lost"] = effects_lost
    report.examples["effects_doubled"] = effects_doubled
    report.info["effects_scheduled"] = len(scheduled)
    report.info["effects_given_up"] = len(given_up)
    report.examples["effects_given_up"] = given_up
    report.info["effects_rerun_after_finish"] = rerun_after_finish
    report.info["effects_interrupted_rerun"] = sum(1 for op in starts if starts[op] > 1)
    report.info["effects_rerun_more_than_once"] = sum(1 for op in starts if starts[op] > 2)
    await _count_blocking(db, report, tasks, results)


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


async def _count_blocking(
    db: Db, report: Report, tasks: dict[str, str], notified: Counter[tuple[str, str]]
) -> None:
    """Blocking calls: answered with the child's result, failed for nothing, delivered twice.

    ``tasks`` maps each child thread to its task (``blk <job>`` for the blocking ``worker``);
    ``notified`` counts result and failure notifications per ``(parent, child)``.
    """
    outcomes: dict[str, dict[str, Any]] = {}
    parents: dict[str, str] = {}
    for child_id, parent_id, execution in await db.rows(
        "SELECT id, parent_id, execution FROM threads WHERE parent_id IS NOT NULL"
    ):
        parents[child_id] = parent_id
        outcome = (_json_value(execution) or {}).get("last_outcome")
        if isinstance(outcome, dict):
            outcomes[child_id] = outcome
    children_of: dict[str, list[str]] = defaultdict(list)
    for child_id, task in tasks.items():
        children_of[task].append(child_id)
    calls: dict[tuple[str, str], str] = {}
    for thread_id, calls_json in await db.rows(
        "SELECT thread_id, tool_calls FROM messages "
        "WHERE role = 'assistant' AND tool_calls IS NOT NULL"
    ):
        for call in _json_value(calls_json) or []:
            name = (call.get("function") or {}).get("name") or call.get("name")
            if name == "worker":
                call_id = str(call.get("id", ""))
                calls[(thread_id, call_id)] = call_id[2:].rsplit("-", 1)[0]
    rows: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for thread_id, call_id, status, content in await db.rows(
        "SELECT thread_id, tool_call_id, tool_status, content FROM messages WHERE role = 'tool'"
    ):
        if (thread_id, call_id) in calls:
            rows[(thread_id, call_id)].append((status or "", content or ""))
    answered, failed_ok, twice, failed = 0, [], [], 0
    for (thread_id, call_id), job in calls.items():
        results = rows.get((thread_id, call_id), [])
        mine = [c for c in children_of.get(f"blk {job}", []) if parents.get(c) == thread_id]
        if any(s == "success" and c.startswith(f"child {job} done") for s, c in results):
            answered += 1
        if any(s == "error" for s, _ in results):
            failed += 1
            if any(outcomes.get(c, {}).get("failed") is False for c in mine):
                failed_ok.append(job)
        deliveries = len(results) + sum(notified[(thread_id, c)] for c in mine)
        if deliveries > 1:
            twice.append(job)
    report.counts["blocking_failed_child_ok"] = len(failed_ok)
    report.counts["blocking_results_twice"] = len(twice)
    report.examples["blocking_failed_child_ok"] = failed_ok
    report.examples["blocking_results_twice"] = twice
    report.info["blocking_calls"] = len(calls)
    report.info["blocking_answered_with_child_result"] = answered
    report.info["blocking_failed"] = failed


def _killed_in_each_run(starts: list[int], kills_us: list[int], since_us: int) -> bool:
    """Whether kills account for every run of an effect that was given up as interrupted.

    Each run the ledger saw must be cut off by a kill (after its start, before the next one).
    A run the ledger never saw was killed between the engine committing its start and the
    effect's first line, which writes the ledger: so there must be a kill for every run,
    ``MAX_EFFECT_ATTEMPTS`` of them, after the effect was scheduled.
    """
    if len(starts) > MAX_EFFECT_ATTEMPTS:
        return False
    bounds = [*sorted(starts), float("inf")]
    if not all(any(bounds[i] < k < bounds[i + 1] for k in kills_us) for i in range(len(starts))):
        return False
    return sum(1 for k in kills_us if k > since_us) >= MAX_EFFECT_ATTEMPTS


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python benchmarks/crash.py --kills 100 [--seed N] [--clients 4]``."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="SIGKILLs to deliver (100)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients (4)")
    parser.add_argument("--workdir", default=None, help="keep the databases and logs here")
    parser.add_argument(
        "--settle",
        type=float,
        default=60.0,
        help="seconds the last server may go without progress while it owes work (60)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="N sa serve workers on one PostgreSQL database instead of one server on SQLite",
    )
    parser.add_argument(
        "--database-url",
        default=None,
        help="with --workers: the postgresql:// database (default: a throwaway cluster)",
    )
    parser.add_argument(
        "--lease-seconds", type=float, default=2.0, help="with --workers: lease expiry (2 s)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=30.0,
        help="with --kills 0: seconds of traffic with no kill before counting (30)",
    )
    args = parser.parse_args(argv)
    # stopped with SIGTERM (``timeout``, CI) as with Ctrl-C: the run is cancelled and its clean-up
    # stops the servers (started in sessions of their own) and removes the cluster
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"seed {seed} (rerun with --seed {seed})", flush=True)
    with contextlib.ExitStack() as stack:
        workdir = (
            Path(args.workdir)
            if args.workdir
            else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sa-crash-")))
        )
        settings = Settings(
            kills=args.kills,
            seed=seed,
            workdir=workdir,
            clients=args.clients,
            settle_timeout=args.settle,
            workers=args.workers,
            database_url=args.database_url,
            lease_seconds=args.lease_seconds,
            duration=args.duration,
        )
        report = asyncio.run(run(settings))
    print(report.format(), flush=True)
    clean = all(report.counts.get(name, 0) == 0 for name in MUST_BE_ZERO)
    return 0 if clean and report.settled else 1
