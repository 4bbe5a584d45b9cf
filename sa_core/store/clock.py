"""Timestamps: integer microseconds since the epoch, strictly increasing within a process."""

from __future__ import annotations

import threading
import time

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
