"""One real ``sa serve`` subprocess on loopback, shared by every test that needs a live server.

Every test that starts ``sa serve`` does it here: a free loopback port (:func:`free_port`, the
only one), the output read on a thread (kept for failure messages, and in a log file if asked),
a wait until the server answers HTTP, the first API key it prints, and a graceful stop (SIGINT,
then kill after a generous ceiling) or a crash (:meth:`ServeProcess.kill`). Benchmarks take
:func:`free_port` from here (with ``tests/`` on ``sys.path``); how they launch the server (CPU
pinning, a profiler, output to /dev/null) is part of what they measure.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def offline_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without provider keys (``--test-provider`` servers)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return env | dict(extra or {})


SA_CLI = (sys.executable, "-m", "sa_core.cli")
"""The ``sa`` command of this interpreter."""


def ignore_sigint() -> None:
    """Ignore SIGINT, as a shell does for a background command (a ``preexec_fn``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ServeProcess:
    """``sa serve`` as a subprocess on its own loopback port.

    Args:
        cwd: The working directory (packs given by relative path resolve from it).
        db: The database URL.
        *args: More ``sa serve`` arguments (``--test-provider``, ``--pack FILE``...).
        env: The child's environment (default: this process's).
        port: A fixed port (a restart on the same port, a taken one), else a free one.
        pythonpath: Folders put in front of ``PYTHONPATH`` (a test plugin's folder).
        launcher: The command that runs ``sa`` (default :data:`SA_CLI`; a wrapper that hides
            an optional SDK, an installed ``sa`` script).
        sigint_ignored: Start with SIGINT ignored, as a shell starts a background command.
        log: Also write everything the server prints to this file (kept for a post-mortem).
        new_session: Start the server in a session of its own (signals to the test's process
            group do not reach it).
    """

    def __init__(
        self,
        cwd: Path,
        db: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        pythonpath: Sequence[Path] = (),
        launcher: Sequence[str] = SA_CLI,
        sigint_ignored: bool = False,
        log: Path | None = None,
        new_session: bool = False,
    ) -> None:
        self.db = db
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        child_env = dict(os.environ if env is None else env)
        if pythonpath:
            paths = [*map(str, pythonpath), child_env.get("PYTHONPATH", "")]
            child_env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        self.proc = subprocess.Popen(
            [*launcher, "serve", "--host", "127.0.0.1",
             "--port", str(self.port), "--db", db, "--log-level", "warning", *args],
            cwd=cwd, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=ignore_sigint if sigint_ignored else None, start_new_session=new_session,
        )  # fmt: skip
        self.printed: list[str] = []
        """Every line read so far (``wait_line`` and ``output`` read the pending ones)."""
        self._pending: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(log,), daemon=True)
        self._reader.start()

    def _read(self, log: Path | None) -> None:
        """Queue each line the server prints (and append it to ``log``) until its output ends."""
        stdout = self.proc.stdout
        assert stdout is not None
        with open(log or os.devnull, "a", buffering=1, encoding="utf-8") as copy:
            for line in stdout:
                self._pending.put(line)
                copy.write(line)

    def output(self) -> str:
        """Everything the server printed so far."""
        while not self._pending.empty():
            self.printed.append(self._pending.get_nowait())
        return "".join(self.printed)

    def wait_line(self, text: str, timeout: float = 60) -> str:
        """The first line not read yet that contains ``text`` (without its newline)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._pending.get(timeout=min(left, 1.0))
            except queue.Empty:
                assert self.proc.poll() is None, f"sa serve exited:\n{self.output()}"
                continue
            self.printed.append(line)
            if text in line:
                return line.rstrip("\n")
        raise AssertionError(f"{text!r} not printed:\n{self.output()}")

    def lines(self) -> list[str]:
        """Everything the server printed so far, line by line (without newlines)."""
        return self.output().splitlines()

    def printed_key(self) -> str | None:
        """The API key a first start prints (a word beginning ``sa_``), if printed yet."""
        self.output()
        words = (w.strip('"') for line in self.printed for w in line.split())
        return next((w for w in words if w.startswith("sa_") and len(w) > 20), None)

    def wait_ready(self, path: str = "/schema/openapi.json", timeout: float = 90) -> None:
        """Return once ``path`` answers HTTP (the packs are loaded and mounted by then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"sa serve exited:\n{self.output()}"
            try:
                httpx.get(f"{self.url}{path}", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"sa serve on {self.port} did not answer:\n{self.output()}")

    def wait_key(self, timeout: float = 60) -> str:
        """The first API key the server printed (a first start on a new database)."""
        self.wait_line("Serving packages", timeout)
        key = self.printed_key()
        assert key is not None, f"sa serve printed no API key:\n{self.output()}"
        return key

    def wait_exit(self, timeout: float = 60) -> int:
        """Wait for the server to exit on its own (a start-up error); its exit code."""
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        self.output()
        return code

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 60, stop_signal: int = signal.SIGINT) -> int:
        """``stop_signal`` (SIGINT), then wait; kill after ``timeout`` seconds. The exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(stop_signal)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        return self._closed()

    def kill(self) -> int:
        """SIGKILL, as a crash would; the exit code."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        return self._closed()

    def _closed(self) -> int:
        self._reader.join(timeout=5)
        self.output()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode
