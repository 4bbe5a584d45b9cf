"""Timestamps: integer microseconds since the epoch, strictly increasing within a process.

And :class:`Clock`, the time schedules run by (the system's, or a test's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

_lock = threading.Lock()
_last = 0


def now_us() -> int:
    """Return the current time in microseconds since the epoch.

    Values are strictly increasing within a process: when the clock has not advanced (or went
    back), the previous value plus one is returned, so ``created_at`` orders rows stably.

    Returns:
        Microseconds since the Unix epoch.

    """
    global _last
    value = time.time_ns() // 1000
    with _lock:
        if value <= _last:
            value = _last + 1
        _last = value
    return value


class Clock(Protocol):
    """The time schedules run by: the system's, or a test's (``sa_core.testing.ManualClock``).

    Row timestamps always use :func:`now_us`; only what is *due* asks a clock.
    """

    def now_us(self) -> int:
        """The current time in microseconds since the epoch."""
        ...

    def wait_seconds(self, until_us: int) -> float:
        """How long to sleep, in real seconds, before the clock may read ``until_us``."""
        ...

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever the clock jumps (a test's clock; the system's never does)."""
        ...


class SystemClock:
    """The system clock."""

    def now_us(self) -> int:
        """The current time (see :func:`now_us`)."""
        return now_us()

    def wait_seconds(self, until_us: int) -> float:
        """The real seconds until ``until_us`` (0 when it has passed)."""
        return max(0.0, (until_us - now_us()) / 1_000_000)

    def on_change(self, callback: Callable[[], None]) -> None:
        """The system clock never jumps: nothing to call."""
