"""ManualClock: a clock a test moves by hand, for schedules (``Runtime(clock=...)``).

    clock = ManualClock(datetime(2030, 1, 7, 7, 59, tzinfo=UTC))
    async with Runtime(packs=[pack], clock=clock) as runtime:
        clock.advance(minutes=1)  # the 08:00 run is due: the runtime starts it
        await runtime.wait_idle()

Schedules run by the runtime's clock only: row timestamps (``created_at``) keep the real time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime


class ManualClock:
    """A clock that stands still until :meth:`advance` or :meth:`set` moves it.

    Args:
        start: The time it reads first (default: now, to the second).
    """

    def __init__(self, start: datetime | None = None) -> None:
        moment = start or datetime.now(UTC).replace(microsecond=0)
        if moment.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime, e.g. datetime(..., tzinfo=UTC)")
        self._now = int(moment.timestamp() * 1_000_000)
        self._callbacks: list[Callable[[], None]] = []

    def now_us(self) -> int:
        """The time it reads (µs since the epoch)."""
        return self._now

    def now(self) -> datetime:
        """The time it reads, as a UTC datetime."""
        return datetime.fromtimestamp(self._now / 1_000_000, tz=UTC)

    def wait_seconds(self, until_us: int) -> float:
        """0 once the clock reads ``until_us``; until then, forever (only a move makes it due)."""
        return 0.0 if until_us <= self._now else float("inf")

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every move (the runtime reads what is due again)."""
        self._callbacks.append(callback)

    def advance(
        self, seconds: float = 0, *, minutes: float = 0, hours: float = 0, days: float = 0
    ) -> datetime:
        """Move the clock forward; returns the new time."""
        delta = seconds + minutes * 60 + hours * 3600 + days * 86400
        if delta < 0:
            raise ValueError("ManualClock.advance moves forward only; use set() to go back")
        return self.set(self._now + int(delta * 1_000_000))

    def set(self, moment: datetime | int) -> datetime:
        """Set the clock to ``moment`` (an aware datetime, or µs since the epoch)."""
        self._now = moment if isinstance(moment, int) else int(moment.timestamp() * 1_000_000)
        for callback in list(self._callbacks):
            callback()
        return self.now()
