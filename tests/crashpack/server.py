"""``sa serve`` on the crash pack, as a subprocess on 127.0.0.1 the harness kills and restarts.

Each start is a :class:`~serve_process.ServeProcess` in a session of its own that also logs to
its own file in the work directory (kept for the post-mortem of a failed run); the first API key
is read from what the first start printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import httpx
from serve_process import ServeProcess

TESTS_DIR = Path(__file__).resolve().parents[1]
PACK_DIR = Path(__file__).resolve().parent
SITE_DIR = PACK_DIR / "site"


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
        self.process: ServeProcess | None = None
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
        self.starts += 1
        began = time.monotonic()
        log_path = self.workdir / f"{self.name}-{self.starts}.log"
        lease = ["--lease-seconds", str(self.lease_seconds)]
        process = self.process = ServeProcess(
            self.workdir,
            self.database_url,
            "--pack",
            str(PACK_DIR),
            *(lease if self.database_url.startswith("postgresql") else []),
            env=self._env(),
            log=log_path,
            new_session=True,
        )
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if process.proc.poll() is not None:
                    raise RuntimeError(
                        f"sa serve exited with {process.proc.returncode}; see {log_path}:\n"
                        + process.output()[-2000:]
                    )
                if self.token is None:
                    self.token = _first_key(process.output())
                if self.token is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        response = await client.get(
                            f"{process.url}/api/packages", headers=self.headers
                        )
                        if response.status_code == 200:
                            self.base_url = process.url
                            self.start_seconds.append(time.monotonic() - began)
                            return process.url
                await asyncio.sleep(0.05)
        self.kill()
        raise RuntimeError(f"sa serve did not answer within {timeout}s; see {log_path}")

    @property
    def pid(self) -> int | None:
        """The running process's id."""
        return self.process.proc.pid if self.process is not None else None

    @property
    def headers(self) -> dict[str, str]:
        """The authorisation header."""
        return {"Authorization": f"Bearer {self.token}"}

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        self.base_url = None
        if self.process is not None:
            self.process.kill()
        self.process = None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server cleanly (SIGTERM), killing it if it hangs."""
        self.base_url = None
        if self.process is not None:
            self.process.stop(timeout, stop_signal=signal.SIGTERM)
        self.process = None


def _first_key(printed: str) -> str | None:
    marker = "keep it safe:"
    if marker not in printed:
        return None
    rest = printed.split(marker, 1)[1].strip().split()
    return rest[0] if rest else None
