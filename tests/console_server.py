"""``sa serve`` in a subprocess with the console test kit plugin, for the console tests."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from sa_core.store import open_store

KIT = Path(__file__).parent / "console_kit"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _create_key(db: str) -> str:
    store = await open_store(db)
    try:
        return (await store.create_api_key("console-tests"))[0]
    finally:
        await store.close()


class ConsoleServer:
    """A live ``sa serve`` on 127.0.0.1 serving the console kit's pack and the installed packs."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        self.db = f"sqlite:///{workdir / 'console.db'}"
        keys: list[str] = []
        # A thread of its own: the caller may already run an event loop (Playwright's).
        maker = threading.Thread(target=lambda: keys.append(asyncio.run(_create_key(self.db))))
        maker.start()
        maker.join()
        self.key = keys[0]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(KIT), path]))}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sa_core.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--db",
                self.db,
                "--log-level",
                "warning",
                *extra,
            ],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(
            target=lambda: [self._lines.put(line) for line in stdout], daemon=True
        ).start()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _drain(self) -> str:
        while not self._lines.empty():
            self.output.append(self._lines.get_nowait())
        return "".join(self.output)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"sa serve exited early:\n{self._drain()}")
            try:
                httpx.get(f"{self.url}/api/packages", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"sa serve did not answer:\n{self._drain()}")

    def api(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.request(method, f"{self.url}/api{path}", headers=headers, timeout=60, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=60)
        self._drain()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
