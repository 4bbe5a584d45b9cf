"""ScheduleDefinition: an agent run started by the clock, and the record of a stored schedule.

``define_schedule(name=, agent=, cron="0 8 * * 1-5" | every="15m", message=, timezone=,
thread="new" | "reuse")`` is data, like every ``define_*``: listed in ``Pack(schedules=[...])``
or created at run time with ``runtime.schedules.create``. Each run sends ``message`` as a user
message to a thread of ``agent`` (a new one, or the same one every time) tagged
``schedule:{name}``. Cron expressions are read by cronsim in the schedule's time zone
(``zoneinfo``); a definition with a bad expression, interval or time zone is refused with every
problem listed (:class:`~sa_core.errors.ScheduleDefinitionError`).

"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, model_validator

from sa_core.errors import ScheduleDefinitionError
from sa_core.spec.base import SpecModel

EVERY_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
"""The units an ``every`` interval is written in: seconds, minutes, hours, days."""
_EVERY = re.compile(r"^\s*(?:\d+\s*[smhd]\s*)+$")
_EVERY_PART = re.compile(r"(\d+)\s*([smhd])")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
THREAD_MODES = ("new", "reuse")
SCHEDULE_TAG = "schedule:"
"""Runs are tagged ``schedule:{name}``."""


def schedule_tag(name: str) -> str:
    """The tag every thread a schedule runs on carries."""
    return f"{SCHEDULE_TAG}{name}"


def parse_every(text: str) -> int:
    """Seconds in an interval such as ``"30s"``, ``"15m"``, ``"2h"``, ``"1d"`` or ``"1h30m"``.

    Raises:
        ValueError: ``text`` is not a positive interval in those units.
    """
    if not isinstance(text, str) or not _EVERY.match(text):
        raise ValueError("write a number and a unit: s, m, h or d (e.g. '30s', '15m', '1d')")
    seconds = sum(int(n) * EVERY_UNITS[unit] for n, unit in _EVERY_PART.findall(text))
    if seconds <= 0:
        raise ValueError("the interval must be longer than 0 seconds")
    return seconds


def _zone_problem(timezone: Any) -> str | None:
    if not isinstance(timezone, str) or not timezone.strip():
        return "timezone is empty; give an IANA time zone name such as 'UTC' or 'Europe/Riga'."
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return (
            f"timezone '{timezone}' is not a known IANA time zone; use a name such as 'UTC', "
            f"'Europe/Riga' or 'America/New_York'."
        )
    return None


def _when_problems(cron: Any, every: Any) -> list[str]:
    if (cron is None) == (every is None):
        return [
            "give exactly one of cron (e.g. cron='0 8 * * 1-5') or every (e.g. every='15m'), "
            f"not {'both' if cron is not None else 'neither'}."
        ]
    if cron is not None:
        try:
            CronSim(str(cron), datetime.now(UTC))
        except (CronSimError, ValueError) as exc:
            return [
                f"cron '{cron}' is not a valid cron expression ({exc}); write five fields, "
                f"minute hour day-of-month month day-of-week, e.g. '0 8 * * 1-5'."
            ]
        return []
    try:
        parse_every(every)
    except ValueError as exc:
        return [f"every '{every}' is not an interval: {exc}."]
    return []


def schedule_problems(
    name: Any, agent: Any, cron: Any, every: Any, message: Any, timezone: Any, thread: Any
) -> list[str]:
    """Every problem of a schedule's fields, each saying what to do (empty: it is sound)."""
    problems: list[str] = []
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(
            f"name {name!r} is not a schedule name; use 1-100 letters, digits, '_', '-', '.' or "
            f"':' (it is used in URLs and in the runs' tag)."
        )
    if not isinstance(agent, str) or not agent.strip():
        problems.append("agent is empty; name the agent each run starts a thread of.")
    problems += _when_problems(cron, every)
    if not isinstance(message, str) or not message.strip():
        problems.append("message is empty; give the user message each run sends.")
    zone = _zone_problem(timezone)
    if zone is not None:
        problems.append(zone)
    if thread not in THREAD_MODES:
        problems.append(
            f"thread {thread!r} is not 'new' (a new thread per run) or 'reuse' (one thread "
            f"every run goes to)."
        )
    return problems


class ScheduleDefinition(SpecModel):
    """A schedule: ``message`` is sent to ``agent`` whenever ``cron`` or ``every`` says.

    Attributes:
        name: Unique in the pack; runs are tagged ``schedule:{name}``.
        agent: The agent each run talks to, an agent of the schedule's pack.
        cron: A cron expression read in ``timezone`` (five fields, or six with seconds first).
        every: An interval: a number and ``s``, ``m``, ``h`` or ``d`` (``"30s"``, ``"15m"``).
        message: The user message each run sends.
        timezone: The IANA time zone ``cron`` is read in (default UTC).
        thread: ``"new"``: each run starts a thread; ``"reuse"``: every run goes to one thread.
        description: What the schedule is for.
    """

    name: str
    agent: str
    message: str
    cron: str | None = None
    every: str | None = None
    timezone: str = "UTC"
    thread: str = "new"
    description: str = ""

    @model_validator(mode="after")
    def _check(self) -> ScheduleDefinition:
        problems = schedule_problems(
            self.name, self.agent, self.cron, self.every, self.message, self.timezone, self.thread
        )
        if problems:
            raise ScheduleDefinitionError(str(self.name), problems)
        return self

    @property
    def every_seconds(self) -> int | None:
        """The interval in seconds (``None`` for a cron schedule)."""
        return parse_every(self.every) if self.every is not None else None

    def next_run_after(self, after_us: int, anchor_us: int) -> int:
        """The first run time (µs since the epoch) strictly after ``after_us``.

        Args:
            after_us: The time the run must come after (the clock's now, when runs were missed).
            anchor_us: When the schedule started: ``every`` runs fall on ``anchor + k * every``.
        """
        interval = self.every_seconds
        if interval is not None:
            step = interval * 1_000_000
            periods = max(0, (after_us - anchor_us) // step + 1)
            return anchor_us + periods * step
        zone = ZoneInfo(self.timezone)
        start = datetime.fromtimestamp(after_us / 1_000_000, tz=zone)
        found = next(CronSim(str(self.cron), start))
        return int(found.timestamp()) * 1_000_000

    def fields(self) -> dict[str, Any]:
        """The definition as stored (every field but the name)."""
        return {
            "agent": self.agent,
            "cron": self.cron,
            "every": self.every,
            "message": self.message,
            "timezone": self.timezone,
            "thread": self.thread,
            "description": self.description,
        }

    def timing(self) -> tuple[str | None, str | None, str]:
        """What decides the run times: ``(cron, every, timezone)``."""
        return (self.cron, self.every, self.timezone)


class ScheduleRecord(BaseModel):
    """A stored schedule: its definition and where it stands.

    Attributes:
        package: The package it runs in.
        name: Its name (unique in the package).
        agent, cron, every, message, timezone, thread, description: As defined.
        status: ``active`` or ``paused`` (``deleted``: a pack's schedule deleted at run time).
        source: ``pack`` (listed in ``Pack(schedules=...)``) or ``api`` (created at run time).
        next_run_at: When it runs next (µs since the epoch).
        last_run_at: The time its last run was due (µs), if it ran.
        last_thread_id: The thread its last run went to.
        thread_id: The thread every run goes to (``thread="reuse"``), once there is one.
        runs: How many runs it started.
        last_error: Why its last due run could not start, if it could not.
        created_at: When it was stored (µs); ``every`` runs count from here.
        updated_at: When it last changed (µs).
    """

    package: str
    name: str
    agent: str
    message: str
    cron: str | None = None
    every: str | None = None
    timezone: str = "UTC"
    thread: str = "new"
    description: str = ""
    status: Literal["active", "paused", "deleted"] = "active"
    source: Literal["pack", "api"] = "api"
    next_run_at: int | None = None
    last_run_at: int | None = None
    last_thread_id: str | None = None
    thread_id: str | None = None
    runs: int = 0
    last_error: str | None = None
    created_at: int = 0
    updated_at: int = 0

    def definition(self) -> ScheduleDefinition:
        """The schedule's definition."""
        return ScheduleDefinition(
            name=self.name,
            agent=self.agent,
            message=self.message,
            cron=self.cron,
            every=self.every,
            timezone=self.timezone,
            thread=self.thread,
            description=self.description,
        )


def define_schedule(
    *,
    name: str,
    agent: str,
    message: str,
    cron: str | None = None,
    every: str | None = None,
    timezone: str = "UTC",
    thread: Literal["new", "reuse"] = "new",
    description: str = "",
) -> ScheduleDefinition:
    """Define a schedule: ``message`` goes to ``agent`` on a cron expression or an interval.

    Example::

        digest = define_schedule(name="digest", agent="writer", cron="0 8 * * 1-5",
                                 timezone="Europe/Riga", message="Write today's digest.")
        poll = define_schedule(name="poll", agent="watcher", every="15m", thread="reuse",
                               message="Check the queue.")
        pack = Pack(name="news", agents=[...], schedules=[digest, poll])

    Raises:
        ScheduleDefinitionError: listing every problem (a bad cron expression, interval or
            time zone, both or neither of ``cron`` and ``every`` ...), naming the schedule.
    """
    return ScheduleDefinition(
        name=name,
        agent=agent,
        message=message,
        cron=cron,
        every=every,
        timezone=timezone,
        thread=thread,
        description=description,
    )
