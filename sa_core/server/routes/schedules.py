"""Schedules of a package: list, create, read, pause, resume and delete them.

The same operations as ``runtime.schedules`` (see ``docs/schedules.md``): a schedule sends its
message to an agent of the package on a cron expression or an interval, each run a thread
tagged ``schedule:{name}``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, delete, get, post
from litestar.params import FromPath, JSONBody
from msgspec import Meta

from sa_core.errors import (
    DefinitionNotFoundError,
    ScheduleDefinitionError,
    ScheduleExistsError,
    ScheduleNotFoundError,
)
from sa_core.runtime import Runtime
from sa_core.server.context import PackDep, RuntimeDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import Base
from sa_core.spec import ScheduleDefinition, ScheduleRecord

Text = Annotated[str, Meta(max_length=20_000)]
Short = Annotated[str, Meta(max_length=200)]


class ScheduleIn(Base, kw_only=True):
    """``POST schedules``: give exactly one of ``cron`` and ``every``."""

    name: Short
    agent: Short
    message: Text
    cron: Short | None = None
    every: Short | None = None
    timezone: Short = "UTC"
    thread: Short = "new"
    """``new`` (a thread per run) or ``reuse`` (one thread every run goes to)."""
    description: Text = ""


class ScheduleOut(Base, kw_only=True):
    """A schedule and where it stands (times in microseconds since the epoch)."""

    package: str
    name: str
    agent: str
    message: str
    cron: str | None
    every: str | None
    timezone: str
    thread: str
    description: str
    status: Literal["active", "paused"]
    source: Literal["pack", "api"]
    """``pack``: listed in the pack's ``schedules``; ``api``: created at run time."""
    next_run_at: int | None
    last_run_at: int | None
    last_thread_id: str | None
    thread_id: str | None
    """The thread every run goes to (``thread: reuse``), once it exists."""
    runs: int
    last_error: str | None
    """Why the last due run could not start, if it could not."""
    created_at: int
    updated_at: int


class SchedulesOut(Base, kw_only=True):
    """``GET schedules``."""

    schedules: list[ScheduleOut]


def schedule_out(record: ScheduleRecord) -> ScheduleOut:
    """Describe a stored schedule."""
    return ScheduleOut(
        package=record.package,
        name=record.name,
        agent=record.agent,
        message=record.message,
        cron=record.cron,
        every=record.every,
        timezone=record.timezone,
        thread=record.thread,
        description=record.description,
        status="paused" if record.status == "paused" else "active",
        source=record.source,
        next_run_at=record.next_run_at,
        last_run_at=record.last_run_at,
        last_thread_id=record.last_thread_id,
        thread_id=record.thread_id,
        runs=record.runs,
        last_error=record.last_error,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


async def _one(runtime: Runtime, package: str, name: str, action: str = "get") -> ScheduleRecord:
    """Get, pause, resume or delete one schedule; a 404 names the package and schedule."""
    schedules = runtime.schedules
    calls = {
        "get": schedules.get,
        "pause": schedules.pause,
        "resume": schedules.resume,
        "delete": schedules.delete,
    }
    try:
        return await calls[action](name, package=package)
    except ScheduleNotFoundError:
        raise ApiError(
            404,
            "schedule_not_found",
            f"Package '{package}' has no schedule {name!r}; GET schedules lists them.",
        ) from None


class SchedulesController(Controller):
    """The schedules of one package."""

    path = "/schedules"

    @get("/", responses=errors(), summary="List schedules")
    async def list_schedules(self, pack: PackDep, runtime: RuntimeDep) -> SchedulesOut:
        """The package's schedules (defined by its pack or created here), by name."""
        records = await runtime.schedules.list(pack.package)
        return SchedulesOut(schedules=[schedule_out(record) for record in records])

    @post("/", status_code=201, responses=errors(409, 422), summary="Create a schedule")
    async def create_schedule(
        self, data: JSONBody[ScheduleIn], pack: PackDep, runtime: RuntimeDep
    ) -> ScheduleOut:
        """Create a schedule of an agent of the package; its first run is the next one due.

        A bad cron expression, interval, time zone or thread mode answers 422 listing every
        problem in ``errors``; a name in use answers 409.
        """
        try:
            definition = ScheduleDefinition(
                name=data.name,
                agent=data.agent,
                message=data.message,
                cron=data.cron,
                every=data.every,
                timezone=data.timezone,
                thread=data.thread,
                description=data.description,
            )
            record = await runtime.schedules.create(definition, package=pack.package)
        except ScheduleDefinitionError as exc:
            problems = [{"message": problem} for problem in exc.problems]
            raise ApiError(422, "invalid_schedule", str(exc), errors=problems) from None
        except DefinitionNotFoundError:
            raise ApiError(
                422,
                "unknown_agent",
                f"Package '{pack.package}' has no agent {data.agent!r}; known: "
                f"{', '.join(pack.agents) or 'none'}.",
            ) from None
        except ScheduleExistsError as exc:
            raise ApiError(409, "schedule_exists", str(exc)) from None
        return schedule_out(record)

    @get("/{name:str}", responses=errors(404), summary="Get a schedule")
    async def get_schedule(
        self, pack: PackDep, runtime: RuntimeDep, name: FromPath[str]
    ) -> ScheduleOut:
        """One schedule: its definition, next and last run, runs started, last error."""
        return schedule_out(await _one(runtime, pack.package, name))

    @post("/{name:str}/pause", status_code=200, responses=errors(404), summary="Pause")
    async def pause_schedule(
        self, pack: PackDep, runtime: RuntimeDep, name: FromPath[str]
    ) -> ScheduleOut:
        """Pause a schedule: no run starts until it is resumed (a run under way goes on)."""
        return schedule_out(await _one(runtime, pack.package, name, "pause"))

    @post("/{name:str}/resume", status_code=200, responses=errors(404), summary="Resume")
    async def resume_schedule(
        self, pack: PackDep, runtime: RuntimeDep, name: FromPath[str]
    ) -> ScheduleOut:
        """Resume a paused schedule from now (runs missed while paused are skipped)."""
        return schedule_out(await _one(runtime, pack.package, name, "resume"))

    @delete("/{name:str}", responses=errors(404), summary="Delete a schedule")
    async def delete_schedule(
        self, pack: PackDep, runtime: RuntimeDep, name: FromPath[str]
    ) -> None:
        """Delete a schedule (204); the threads it started are kept.

        A schedule the pack defines stays deleted when the server restarts.
        """
        await _one(runtime, pack.package, name, "delete")
