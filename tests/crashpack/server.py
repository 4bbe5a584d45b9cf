"""``sa serve`` on the crash pack, as a subprocess on 127.0.0.1 the harness kills and restarts.

Each start logs to its own file in the work directory (kept for the post-mortem of a failed
run); the first API key is read from the first start's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from serve_process import free_port

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
