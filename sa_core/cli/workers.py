"""``sa serve --workers N``: N worker processes on one host, sharing one port and one database.

The parent process upgrades the schema and creates the first API key once, binds the listening
socket, and starts N ``sa serve`` processes that accept on that socket (the kernel spreads
connections between them). Each worker is a full runtime: threads run on whichever worker holds
their lease, and streams reach clients on any worker (see :mod:`sa_core.engine.workers.leases`). A
worker that exits unexpectedly is restarted; its threads are taken over by the others meanwhile.
SIGINT/SIGTERM stop every worker gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import time

from sa_core.waits import event_set_within

RESTART_DELAY = 1.0


def worker_command(args: argparse.Namespace, fd: int) -> list[str]:
    """The command line of one worker process."""
    command = [sys.executable, "-m", "sa_core.cli", "serve", "--host", args.host]
    command += ["--port", str(args.port), "--db", args.db, "--log-level", args.log_level]
    for pack in args.packs:
        command += ["--pack", pack]
    if args.test_provider is True:
        command.append("--test-provider")
    elif args.test_provider:  # a script: every worker answers from the same one
        command.append(f"--test-provider={args.test_provider}")
    if args.lease_seconds is not None:
        command += ["--lease-seconds", str(args.lease_seconds)]
    command += ["--client-settings", args.client_settings]
    return [*command, "--worker-fd", str(fd)]


async def serve_workers(args: argparse.Namespace) -> int:
    """Prepare the database, bind the port and supervise ``args.workers`` worker processes."""
    from sa_core.cli.serve import announce_first_key
    from sa_core.cli.serve_banner import BindError, bind
    from sa_core.server.auth import ensure_first_key
    from sa_core.store import open_store

    if args.workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return 2
    if not (args.db or "").startswith(("postgresql://", "postgres://", "postgresql+asyncpg://")):
        print(
            "error: --workers above 1 needs a shared PostgreSQL database: add "
            "--db postgresql://user:pass@host/db (SQLite serves one worker).",
            file=sys.stderr,
        )
        return 2
    store = await open_store(args.db)
    try:
        token = await ensure_first_key(store)
    finally:
        await store.close()
    if token is not None:
        announce_first_key(token)
    try:
        listener = bind(args.host, args.port)
    except BindError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    fd = listener.fileno()
    port = listener.getsockname()[1]
    print(f"Starting {args.workers} workers on http://{args.host}:{port}", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    procs: list[subprocess.Popen[bytes]] = []

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(worker_command(args, fd), pass_fds=(fd,))

    try:
        procs = [spawn() for _ in range(args.workers)]
        while not stopping.is_set():
            await event_set_within(stopping, 0.5)
            for index, proc in enumerate(procs):
                if proc.poll() is not None and not stopping.is_set():
                    print(
                        f"worker {proc.pid} exited ({proc.returncode}); restarting it",
                        file=sys.stderr,
                        flush=True,
                    )
                    await asyncio.sleep(RESTART_DELAY)
                    procs[index] = spawn()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        listener.close()
    return 0
