"""SQLite WAL checkpoints on a background thread, so a commit never waits on an ``fsync``.

In WAL mode with ``synchronous=NORMAL`` a commit appends to the write-ahead log and does not
sync; every thousand pages, though, the committing connection copies the log back into the
database file and syncs it (the automatic checkpoint). On the event loop thread that is a stall
of milliseconds to tens of milliseconds every few hundred commits: measured on a busy machine,
the median commit took 15 µs and the mean 121 µs, the slowest 1 % (the checkpoints) being 87 %
of all commit time, and every request and turn of the process waited behind them.

Here a daemon thread with its own connection runs a ``PASSIVE`` checkpoint a few times a
second (the ``sqlite3`` module releases the GIL while SQLite works, so the loop keeps running),
and the store's connections raise the automatic checkpoint to a far larger log
(``AUTOCHECKPOINT_PAGES``) as a safety net should the thread fall behind. Durability is
unchanged: checkpointing moves committed pages, it never decides what is committed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading

INTERVAL_SECONDS = 0.2
"""How often the thread checkpoints the log."""
AUTOCHECKPOINT_PAGES = 20_000
"""The store's connections still checkpoint themselves past this many log pages (~80 MB)."""


class Checkpointer:
    """A background thread checkpointing one SQLite database's write-ahead log.

    Args:
        path: The database file.
        interval: Seconds between checkpoints.
    """

    def __init__(self, path: str, interval: float = INTERVAL_SECONDS) -> None:
        self.path = path
        self.interval = interval
        self.checkpoints = 0
        """Checkpoints run so far (for tests and diagnostics)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"sa-sqlite-checkpoint:{self.path}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a checkpoint in progress finishes first)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return  # the store reports problems with the file itself
        try:
            conn.execute("PRAGMA busy_timeout=1000")
            while not self._stop.wait(self.interval):
                with contextlib.suppress(sqlite3.Error):  # busy, or the file went away
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
        finally:
            conn.close()


class CheckpointerSet:
    """One :class:`Checkpointer` per database file while the engine holds connections to it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.open = 0
        self.checkpointer: Checkpointer | None = None
        self._lock = threading.Lock()

    def connected(self) -> None:
        """A connection opened: start checkpointing with the first one."""
        with self._lock:
            self.open += 1
            if self.checkpointer is None:
                self.checkpointer = Checkpointer(self.path)
                self.checkpointer.start()

    def closed(self) -> None:
        """A connection closed: stop checkpointing with the last one."""
        with self._lock:
            self.open = max(0, self.open - 1)
            checkpointer = self.checkpointer if self.open == 0 else None
            if checkpointer is not None:
                self.checkpointer = None
        if checkpointer is not None:
            checkpointer.stop()
