"""A real ``sa serve --test-provider`` for the OpenAI-compatible API tests.

The server hosts the installed example packs (``make setup`` installs them); the reminders
pack needs no variables, so its agent answers offline. ``Served.start`` waits for the port and
keeps the first start's API key, so a restart on the same database reuses it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

MODEL = "reminders/reminder_assistant"
READY_SECONDS = 60.0


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """``sa serve --test-provider`` as a subprocess on its own loopback port."""

    def __init__(self, cwd: Path, db: str, *extra: str, key: str = "") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = key
        self.lines: list[str] = []
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sa_core.cli", "serve", "--test-provider", "--db", db,
             "--port", str(self.port), "--log-level", "warning", "--no-ui", *extra],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("    sa_") and not self.key:
                self.key = line.strip()

    def start(self) -> Served:
        """Wait until the server answers (and printed its key, on a first start)."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"sa serve exited: {''.join(self.lines)}"
            try:
                httpx.get(f"{self.url}/schema/openapi.json", timeout=2)
                if self.key:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"sa serve did not answer: {''.join(self.lines)}")

    @property
    def base_url(self) -> str:
        """The OpenAI client's ``base_url``."""
        return f"{self.url}/v1"

    def stop(self) -> None:
        """Stop the server gracefully (SIGINT), then for good."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
