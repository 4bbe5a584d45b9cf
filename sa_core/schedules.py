"""``runtime.schedules``: create, list, get, pause, resume and delete schedules at run time.

Schedules listed in ``Pack(schedules=[...])`` are stored when the runtime starts; these calls
work on those and on schedules created here alike (see :mod:`sa_core.engine.workers.schedules` for
how runs start, and ``docs/schedules.md``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from sa_core.engine.workers import schedules as engine
from sa_core.spec.schedules import ScheduleDefinition, ScheduleRecord, define_schedule

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel


class Schedules:
    """The schedules of a runtime's packs (``runtime.schedules``), once the runtime started.

    Args:
        kernel: Returns the runtime's kernel (built when it starts).
    """

    def __init__(self, kernel: Callable[[], Kernel]) -> None:
        self._kernel_of = kernel

    def _kernel(self) -> Kernel:
        try:
            return self._kernel_of()
        except AttributeError:
            raise RuntimeError(
                "runtime.schedules works once the runtime has started: use it inside "
                "'async with Runtime(...) as runtime:' or after 'await runtime.start()'."
            ) from None

    async def create(
        self,
        definition: ScheduleDefinition | None = None,
        *,
        name: str | None = None,
        agent: str | None = None,
        message: str | None = None,
        cron: str | None = None,
        every: str | None = None,
        timezone: str = "UTC",
        thread: Literal["new", "reuse"] = "new",
        description: str = "",
        package: str | None = None,
    ) -> ScheduleRecord:
        """Create a schedule: a definition, or its fields as in ``define_schedule``.

        Example::

            await runtime.schedules.create(name="poll", agent="watcher", every="15m",
                                           message="Check the queue.")

        Args:
            definition: A ``define_schedule(...)``; or give the fields below instead.
            name: Unique in the package.
            agent: The agent each run talks to (``package/agent``, or an agent of ``package``).
            message: The user message each run sends.
            cron: A cron expression, read in ``timezone``.
            every: An interval: ``"30s"``, ``"15m"``, ``"2h"``, ``"1d"``.
            timezone: An IANA time zone name (default UTC).
            thread: ``"new"`` (a thread per run) or ``"reuse"`` (one thread for every run).
            description: What it is for.
            package: The package it runs in (default: the agent's).

        Raises:
            ScheduleDefinitionError: listing every problem of the fields.
            DefinitionNotFoundError: the agent or the package is unknown.
            ScheduleExistsError: the package has a schedule of this name.
        """
        if definition is None:
            definition = define_schedule(
                name=name or "",
                agent=agent or "",
                message=message or "",
                cron=cron,
                every=every,
                timezone=timezone,
                thread=thread,
                description=description,
            )
        return await engine.create_schedule(self._kernel(), definition, package)

    async def list(self, package: str | None = None) -> builtins.list[ScheduleRecord]:
        """The schedules of ``package`` (default: of every package), by package and name."""
        kernel = self._kernel()
        if package is not None:
            kernel.registry.scope(package)  # an unknown package says so
        return await kernel.store.list_schedules(package)

    async def get(self, name: str, *, package: str | None = None) -> ScheduleRecord:
        """A schedule by name (``package`` is needed only when two packages use the name).

        Raises:
            ScheduleNotFoundError: there is no such schedule.
        """
        return await engine.find_schedule(self._kernel(), name, package)

    async def pause(self, name: str, *, package: str | None = None) -> ScheduleRecord:
        """Pause a schedule: no run starts until it is resumed."""
        return await engine.pause_schedule(self._kernel(), name, package)

    async def resume(self, name: str, *, package: str | None = None) -> ScheduleRecord:
        """Resume a paused schedule; its next run is the first one after now."""
        return await engine.resume_schedule(self._kernel(), name, package)

    async def delete(self, name: str, *, package: str | None = None) -> ScheduleRecord:
        """Delete a schedule (threads it started are kept); returns it as it was."""
        return await engine.delete_schedule(self._kernel(), name, package)
