"""Run a crash-test worker script in a subprocess until it reaches its point, then SIGKILL it.

The workers (``approval_worker.py``, ``compaction_worker.py``, ``durable_worker.py``) print
``THREAD <id>`` once they have a thread and ``POINT`` when they reach the point a test kills
them at (the durable worker's ``ack`` mode prints ``ACK``), and then block forever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def kill_at_marker(script: Path, *args: str, markers: tuple[str, ...] = ("POINT",)) -> str:
    """Run ``script`` with ``args`` until it prints one of ``markers``, SIGKILL it, and return
    the thread id it printed; fail if it ends before that or did not die of the SIGKILL."""
    lines = kill_at_marker_lines(script, *args, markers=markers)
    thread_id = next((line.split()[1] for line in lines if line.startswith("THREAD ")), "")
    assert thread_id, "the worker printed no THREAD line"
    return thread_id


def kill_at_marker_lines(
    script: Path, *args: str, markers: tuple[str, ...] = ("POINT",)
) -> list[str]:
    """:func:`kill_at_marker`, returning every line the worker printed before the marker."""
    process = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() in markers:
                break
            lines.append(line.rstrip("\n"))
        else:
            error = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"worker ended early: {error}")
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert process.returncode == -signal.SIGKILL
    return lines
