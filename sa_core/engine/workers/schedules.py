"""Schedules: agent runs the clock starts (``define_schedule``, ``runtime.schedules``).

The effect loop (:mod:`sa_core.engine.delivery.effects`) drives schedules as it drives effects: it
sleeps until the earliest of the next due effect and the next due schedule (asking
:class:`ScheduleTimer`), and wakes early when an effect is scheduled, a schedule is created or
resumed, a test's clock jumps, or (several workers) a reaper round passes. No other loop runs.

**Claiming a run.** :func:`claim_run` moves the schedule's ``next_run_at`` on with a
compare-and-set on the value it read (:meth:`~sa_core.store.Store.advance_schedule`) and, in
the same transaction, stores the run: a new thread tagged ``schedule:{name}`` (or the reused
one) and its ``message`` as a queued user message. Of several workers that find the same run
due, one claims it; a crash before the commit leaves it due, after it leaves it stored. The
run's turn then starts like any queued work: here at once, on another worker through its
lease, after a crash through the workers' reapers or (one process) the next start.

**Missed runs.** A run found due long after its time (the process was down) runs once, and
the next run is the first one after *now*: runs missed meanwhile are not made up one by one.
A paused schedule is resumed from now, so the runs it missed while paused are skipped.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sa_core.engine.delivery.delivery import open_thread, start_turn
from sa_core.engine.subagents.creation import thread_row
from sa_core.engine.subagents.subagent_spawn import boot_immediate
from sa_core.engine.variables import resolve_agent
from sa_core.errors import (
    ConfigurationError,
    DefinitionNotFoundError,
    ScheduleExistsError,
    ScheduleNotFoundError,
)
from sa_core.spec import QueueMessageInput
from sa_core.spec.schedules import ScheduleDefinition, ScheduleRecord, schedule_tag
from sa_core.store.clock import Clock, now_us

if TYPE_CHECKING:
    from sa_core.engine.events import QueuedFrame
    from sa_core.engine.kernel import Kernel
    from sa_core.store import ThreadRow

log = logging.getLogger("sa_core.schedules")


class ScheduleTimer:
    """When schedules are due, and the start of their runs (driven by the effect loop).

    Args:
        clock: The time schedules run by (a test gives its own).
    """

    retry_seconds: float = 1.0
    """How long the loop waits after a due run failed to start for an unexpected reason."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.kernel: Kernel | None = None
        self.starting = 0
        """Calls of :meth:`run_due` under way (a claimed run may not have its runner yet)."""

    def _bound(self) -> Kernel:
        if self.kernel is None:
            raise RuntimeError("schedules run once the runtime has started")
        return self.kernel

    async def start(self, kernel: Kernel) -> None:
        """Store the packs' schedules, and wake the effect loop whenever the clock jumps."""
        self.kernel = kernel
        await sync_pack_schedules(kernel, self.clock.now_us())
        self.clock.on_change(kernel.effects.wake)

    async def wait_seconds(self) -> float | None:
        """Real seconds until the next schedule is due (0: due now; ``None``: none active)."""
        next_at = await self._bound().store.next_schedule_time()
        return None if next_at is None else self.clock.wait_seconds(next_at)

    async def has_due(self) -> bool:
        """Whether a schedule is due now."""
        wait = await self.wait_seconds()
        return wait is not None and wait <= 0

    async def run_due(self) -> list[str]:
        """Claim and start every run due now; returns the threads they run on."""
        kernel = self._bound()
        now = self.clock.now_us()
        started: list[str] = []
        self.starting += 1
        try:
            for record in await kernel.store.due_schedules(now):
                thread_id = await self._claim(kernel, record, now)
                if thread_id is not None:
                    started.append(thread_id)
        finally:
            self.starting -= 1
        return started

    async def _claim(self, kernel: Kernel, record: ScheduleRecord, now: int) -> str | None:
        try:
            return await claim_run(kernel, record, now)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("schedule %s/%s: its due run did not start", record.package, record.name)
            await asyncio.sleep(self.retry_seconds)  # not again at once: it is still due
            return None


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a schedule: the thread it goes to (``row``: a new one) and its message."""

    thread_id: str
    row: ThreadRow | None
    entry: QueueMessageInput


async def plan_run(kernel: Kernel, record: ScheduleRecord) -> Run:
    """The thread a due run goes to, and its message (nothing is stored).

    Raises:
        ConfigurationError: the agent is gone, or a variable it needs has no value.
    """
    entry = QueueMessageInput(
        role="user",
        content=record.message,
        metadata={"schedule": record.name, "scheduled_for": record.next_run_at},
    )
    if record.thread == "reuse" and record.thread_id is not None:
        row = await kernel.store.get_thread(record.thread_id)
        if row is not None and row.terminated is None:
            return Run(row.id, None, entry)
    row = thread_row(
        kernel,
        record.agent,
        package=record.package,
        tags=[schedule_tag(record.name)],
        properties={"schedule": record.name},
    )
    return Run(row.id, row, entry)


async def claim_run(kernel: Kernel, record: ScheduleRecord, now: int) -> str | None:
    """Claim the schedule's due run and start it; returns its thread (``None``: not claimed).

    The claim (``next_run_at`` moved on from the value in ``record``) and the run (its thread
    and message) commit in one transaction. A run that cannot start (its agent is gone, a
    variable has no value) moves ``next_run_at`` on too, and records why in ``last_error``.
    """
    store = kernel.store
    due = record.next_run_at
    if due is None:
        return None
    following = record.definition().next_run_after(max(now, due), due)
    try:
        run = await plan_run(kernel, record)
    except ConfigurationError as exc:
        error = f"{type(exc).__name__}: {exc}"
        values = {"next_run_at": following, "last_error": error, "updated_at": now_us()}
        if await store.advance_schedule(record.package, record.name, due, values):
            log.warning("schedule %s/%s: run skipped: %s", record.package, record.name, error)
        return None
    values = {
        "next_run_at": following,
        "last_run_at": due,
        "last_thread_id": run.thread_id,
        "last_error": None,
        "updated_at": now_us(),
    }
    if record.thread == "reuse":
        values["thread_id"] = run.thread_id
    queue_id = ""
    async with store.transaction() as tx:
        claimed = await store.advance_schedule(
            record.package, record.name, due, values, count_run=True, tx=tx
        )
        if claimed:
            if run.row is not None:
                await store.create_thread(run.row, tx=tx)
            queue_id = await store.enqueue(run.thread_id, run.entry, tx=tx)
    if not claimed:
        return None
    await start_run(kernel, run, queue_id)
    return run.thread_id


async def start_run(kernel: Kernel, run: Run, queue_id: str) -> None:
    """Start the turn of a claimed run (its thread and message are committed)."""
    thread_id = run.thread_id
    if run.row is not None:  # a new thread: its immediate subagents first, as any new thread's
        await boot_immediate(kernel, await open_thread(kernel, thread_id))
    frame: QueuedFrame = {"type": "queued", "queue_id": queue_id, "role": "user", "silent": False}
    kernel.events.publish(thread_id, frame)
    scheduler = kernel.scheduler
    if scheduler.is_running(thread_id):
        scheduler.note_queued(thread_id)
    else:
        start_turn(kernel, thread_id, "a")
        kernel.placement.notify_work(thread_id, "a")  # it may run on another worker


# -- keeping the store in step with the packs ---------------------------------------------------


def new_record(
    package: str, definition: ScheduleDefinition, source: str, now: int
) -> ScheduleRecord:
    """The stored form of a new schedule; its first run is the first one after ``now``."""
    stamp = now_us()
    return ScheduleRecord(
        package=package,
        name=definition.name,
        **definition.fields(),
        status="active",
        source="pack" if source == "pack" else "api",
        next_run_at=definition.next_run_after(now, now),
        created_at=stamp,
        updated_at=stamp,
    )


def _redefined(
    record: ScheduleRecord, definition: ScheduleDefinition, now: int
) -> dict[str, object]:
    """The fields a changed pack definition changes (none: it did not change)."""
    stored = record.definition()
    if stored.fields() == definition.fields():
        return {}
    values: dict[str, object] = {**definition.fields(), "updated_at": now_us()}
    if stored.timing() != definition.timing():
        values["next_run_at"] = definition.next_run_after(now, now)
    return values


async def sync_pack_schedules(kernel: Kernel, now: int) -> None:
    """Store the schedules the packs define: new ones, changed ones; drop those gone.

    A pack's schedule keeps its state (paused, next run, reused thread) across restarts; one
    deleted at run time stays deleted; one created at run time is left as it is.
    """
    store = kernel.store
    for scope in kernel.registry.scopes.values():
        defined = {schedule.name: schedule for schedule in scope.pack.schedules}
        stored = {
            r.name: r for r in await store.list_schedules(scope.package, include_deleted=True)
        }
        gone = [name for name, r in stored.items() if r.source == "pack" and name not in defined]
        await store.remove_schedules(scope.package, gone)
        for name, definition in defined.items():
            record = stored.get(name)
            if record is None:
                await store.insert_schedule(new_record(scope.package, definition, "pack", now))
            elif record.source == "pack" and record.status != "deleted":
                values = _redefined(record, definition, now)
                if values:
                    await store.update_schedule(scope.package, name, values)


# -- runtime.schedules ----------------------------------------------------------------------------


async def create_schedule(
    kernel: Kernel, definition: ScheduleDefinition, package: str | None = None
) -> ScheduleRecord:
    """Store a schedule created at run time; its first run is the first one after now.

    Raises:
        DefinitionNotFoundError: the agent (or the package) is unknown.
        ScheduleExistsError: the package has a schedule of this name.
    """
    agent, scope = resolve_agent(kernel.registry, definition.agent, package)
    definition = definition.model_copy(update={"agent": agent.name})
    record = new_record(scope.package, definition, "api", kernel.schedules.clock.now_us())
    if not await kernel.store.insert_schedule(record):
        raise ScheduleExistsError(scope.package, definition.name)
    kernel.effects.wake()
    return await find_schedule(kernel, definition.name, scope.package)


async def find_schedule(kernel: Kernel, name: str, package: str | None = None) -> ScheduleRecord:
    """The schedule ``name`` of ``package`` (any package, when only one has that name).

    Raises:
        ScheduleNotFoundError: there is none (or several packages have one: pass ``package``).
    """
    if package is not None:
        kernel.registry.scope(package)  # an unknown package says so
        found = await kernel.store.get_schedule(package, name)
        if found is None:
            raise ScheduleNotFoundError(package, name)
        return found
    matches = [r for r in await kernel.store.list_schedules() if r.name == name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ScheduleNotFoundError(None, name)
    raise DefinitionNotFoundError(
        "schedule",
        name,
        hint=f"Several packages have one ({', '.join(r.package for r in matches)}); pass package=.",
    )


async def pause_schedule(kernel: Kernel, name: str, package: str | None = None) -> ScheduleRecord:
    """Pause a schedule: no run starts until it is resumed (a run already started goes on)."""
    record = await find_schedule(kernel, name, package)
    if record.status != "paused":
        values = {"status": "paused", "updated_at": now_us()}
        await kernel.store.update_schedule(record.package, record.name, values)
    return await find_schedule(kernel, record.name, record.package)


async def resume_schedule(kernel: Kernel, name: str, package: str | None = None) -> ScheduleRecord:
    """Resume a paused schedule from now: its next run is the first one after now."""
    record = await find_schedule(kernel, name, package)
    if record.status == "paused":
        now = kernel.schedules.clock.now_us()
        values = {
            "status": "active",
            "next_run_at": record.definition().next_run_after(now, now),
            "updated_at": now_us(),
        }
        await kernel.store.update_schedule(record.package, record.name, values)
        kernel.effects.wake()
    return await find_schedule(kernel, record.name, record.package)


async def delete_schedule(kernel: Kernel, name: str, package: str | None = None) -> ScheduleRecord:
    """Delete a schedule (a pack's stays deleted across restarts); returns it as it was.

    Threads it started are kept.
    """
    record = await find_schedule(kernel, name, package)
    if not await kernel.store.delete_schedule(
        record.package, record.name, keep=record.source == "pack"
    ):
        raise ScheduleNotFoundError(record.package, record.name)
    return record
