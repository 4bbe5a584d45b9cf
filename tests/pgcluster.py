"""A throwaway PostgreSQL cluster for tests and benchmarks, started from the server binaries.

No container runtime: ``initdb`` creates a cluster in a temporary directory and ``pg_ctl`` starts
it on 127.0.0.1 on a free port, its unix socket in the same directory. PostgreSQL refuses to run
as root, so under root the directory is handed to the ``postgres`` (or ``nobody``) user and the
binaries run through ``runuser``. Every failure raises :class:`PostgresUnavailable` saying why.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from serve_process import free_port

SUPERUSER = "sa"
PASSWORD = "sa"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL could not be found or started; the message says what to install or fix."""


def find_bindir() -> Path:
    """The directory holding ``initdb``/``pg_ctl`` (``$SA_PG_BINDIR``, Debian's, or ``PATH``)."""
    candidates = [os.environ.get("SA_PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found: install Debian's "
        "`postgresql` package (apt-get install -y postgresql, done by `make setup`) or set "
        "SA_PG_BINDIR to the directory holding initdb."
    )


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise PostgresUnavailable("Running as root and neither a postgres nor a nobody user exists.")


@dataclass
class Cluster:
    """A running cluster: connect as ``sa``/``sa`` to 127.0.0.1:``port``."""

    root: Path
    port: int
    bindir: Path
    user: str | None

    @property
    def data(self) -> Path:
        """The data directory."""
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        """The ``postgresql://`` URL of a database of this cluster."""
        return f"postgresql://{SUPERUSER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *args] if self.user else list(args)

    def run(self, *args: str, timeout: float = 60) -> str:
        """Run a server binary as the cluster's owner; raise with its output on failure."""
        cmd = self._cmd(str(self.bindir / args[0]), *args[1:])
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"{args[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout}"
            )
        return done.stdout

    def start(self) -> None:
        """initdb and start the server; wait until it accepts connections."""
        self.root.mkdir(parents=True, exist_ok=True)
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD)
        if self.user:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.run(
            "initdb", "-D", str(self.data), "-U", SUPERUSER, f"--pwfile={pwfile}",
            "-A", "scram-sha-256", "-E", "UTF8", "--no-sync", "--locale=C",
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.root} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB"
        )
        self.run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
            "-w", "-t", "60", "start",
        )

    def stop(self) -> None:
        """Stop the server immediately and delete its files."""
        with contextlib.suppress(PostgresUnavailable, subprocess.TimeoutExpired):
            self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server log (for error messages)."""
        try:
            return (self.root / "log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def start_cluster() -> Cluster:
    """Create and start a cluster in a fresh temporary directory.

    Raises:
        PostgresUnavailable: The binaries are missing or the server did not start.

    """
    bindir = find_bindir()
    user = _run_as()
    root = Path(tempfile.mkdtemp(prefix="sa-pg-"))
    cluster = Cluster(root=root, port=free_port(), bindir=bindir, user=user)
    try:
        cluster.start()
    except PostgresUnavailable as error:
        log = cluster.log_tail()
        cluster.stop()
        raise PostgresUnavailable(f"{error}\n{log}") from None
    return cluster


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    """Start a cluster for the block and remove it afterwards."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


def wait_port(port: int, timeout: float = 30) -> None:
    """Wait until something accepts TCP connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")
