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
  run after a kill within :data:`~crashpack.counting.COMMIT_WINDOW_US` of the first run's end is
  reported as ``effects_rerun_after_finish``, for information. An effect whose two runs a kill
  each cut off is marked failed by the engine (at most twice in all, see
  ``docs/architecture.md``): it is reported as ``effects_given_up``, for information, only when
  the ledger shows both runs starting and a kill after each; any other effect that never
  finished is lost.

With ``workers`` (``--workers N``) the run uses N ``sa serve`` workers on one PostgreSQL
database (a throwaway cluster from ``tests/pgcluster.py`` unless a URL is given) instead of one
server on SQLite: the clients spread over the workers, each kill SIGKILLs a worker that holds a
thread's lease (one running turns), the other workers must take its threads over and finish
them, and the killed worker is restarted before the next kill. The counts are the same.

The parts: :mod:`crashpack.server` (the killed server), :mod:`crashpack.clients` (the load),
:mod:`crashpack.counting` (the report); this module runs them and kills.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path

from crashpack import ledger
from crashpack.clients import Load, client
from crashpack.counting import MUST_BE_ZERO, Db, Report, answered_jobs, count
from crashpack.server import Server


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


# -- the run ------------------------------------------------------------------------------


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
        asyncio.create_task(client(i, load, random.Random(rng.random())))
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
        await count(db, server.ledger_path, load, report)
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
        answers = await answered_jobs(db)
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
