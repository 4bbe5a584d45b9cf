"""Threads: create, list, read, delete, stop, terminate; logs, children, effects, variables."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Controller, delete, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from sa_core.errors import ConfigurationError, MissingVariablesError, ThreadTerminatedError
from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.context import PackDep, RuntimeDep, ThreadDep, thread_row
from sa_core.server.errors import ApiError, errors, to_api_error
from sa_core.server.routes.thread_status import ThreadStatusFilter, threads_with_status
from sa_core.server.schemas import (
    ChildrenOut,
    CreateThreadIn,
    DeletedOut,
    EffectsOut,
    EnvVariableOut,
    LogsOut,
    ProvideVariablesIn,
    ProvideVariablesOut,
    SubagentOut,
    ThreadDetailOut,
    ThreadOut,
    ThreadsOut,
    ThreadStatusOut,
    VariablesRequestOut,
    convert,
)
from sa_core.state import ThreadState
from sa_core.store import UNSET, ThreadRow

Limit = Annotated[int, QueryParameter(ge=1, le=500, description="Page size.")]
Offset = Annotated[int, QueryParameter(ge=0, le=1_000_000_000, description="Rows to skip.")]


def thread_out(runtime: Runtime, scope: PackScope, row: ThreadRow) -> ThreadOut:
    """Describe a thread: variables by name and type, never their values."""
    secrets = runtime.kernel.secrets.secret_names(scope, row)
    env = [
        EnvVariableOut(
            name=name,
            type="text" if row.env_types.get(name) == "text" and name not in secrets else "secret",
        )
        for name in sorted(row.env)
    ]
    return ThreadOut(
        id=row.id,
        package=row.package,
        agent=row.agent_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        parent_id=row.parent_id,
        user_id=row.user_id,
        terminated_at=row.terminated,
        stopped=row.stopped,
        running=runtime.is_running(row.id),
        status=row.execution.get("status"),
        tags=list(row.tags),
        env=env,
    )


def _children(thread: ThreadState) -> list[SubagentOut]:
    return [convert(entry.model_dump(mode="json"), SubagentOut) for entry in thread.children]


class ThreadsController(Controller):
    """Threads of one package."""

    path = "/threads"

    @post("/", status_code=201, responses=errors(422), summary="Create a thread")
    async def create_thread(
        self, data: JSONBody[CreateThreadIn], pack: PackDep, runtime: RuntimeDep
    ) -> ThreadOut:
        """Create a thread of an entry agent.

        Required variables without a value answer 422 with ``missing`` listing each one and the
        definition declaring it.
        """
        if data.agent not in pack.agents or data.agent not in pack.pack.entry_agent_names():
            raise ApiError(
                422,
                "unknown_agent",
                f"Package '{pack.package}' has no entry agent {data.agent!r}; "
                f"known: {', '.join(pack.pack.entry_agent_names()) or 'none'}.",
            )
        try:
            thread = await runtime.create_thread(
                data.agent,
                env=data.env,
                tags=data.tags,
                package=pack.package,
                env_types=data.env_types,
            )
        except MissingVariablesError as exc:
            raise to_api_error(exc) from None
        return thread_out(runtime, pack, thread_row(thread))

    @get("/", responses=errors(), summary="List threads")
    async def list_threads(
        self,
        pack: PackDep,
        runtime: RuntimeDep,
        agent: FromQuery[str | None] = None,
        tag: FromQuery[str | None] = None,
        include_children: FromQuery[bool] = False,
        status: FromQuery[ThreadStatusFilter | None] = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> ThreadsOut:
        """List the package's threads, newest first.

        Subagent threads are listed only with ``include_children``. ``status`` keeps the
        threads that are ``running``, ``awaiting_human``, ``idle``, ``new`` (no turn ended
        yet), ``stopped`` or ``terminated``.
        """
        filters: dict[str, Any] = {
            "package": pack.package,
            "agent_id": agent,
            "tag": tag,
            "parent_id": UNSET if include_children else None,
        }
        if status is None:
            rows, total = await runtime.store.list_threads(limit=limit, offset=offset, **filters)
        else:
            rows, total = await threads_with_status(runtime, status, limit, offset, filters)
        return ThreadsOut(
            threads=[thread_out(runtime, pack, row) for row in rows],
            total=total,
            has_more=offset + len(rows) < total,
        )

    @get("/{thread_id:str}", responses=errors(404), summary="Read a thread")
    async def get_thread(
        self, thread: ThreadDep, pack: PackDep, runtime: RuntimeDep
    ) -> ThreadDetailOut:
        """Read a thread and its subagent registry."""
        base = thread_out(runtime, pack, thread_row(thread))
        fields = {f: getattr(base, f) for f in ThreadOut.__struct_fields__}
        return ThreadDetailOut(**fields, children=_children(thread))

    @delete("/{thread_id:str}", status_code=200, responses=errors(404), summary="Delete a thread")
    async def delete_thread(self, thread: ThreadDep, runtime: RuntimeDep) -> DeletedOut:
        """Hard-delete the thread and its descendants (in-flight turns are cancelled)."""
        return DeletedOut(deleted=await runtime.delete_thread(thread.thread_id))

    @post("/{thread_id:str}/stop", status_code=200, responses=errors(404, 409), summary="Stop")
    async def stop(self, thread: ThreadDep) -> ThreadStatusOut:
        """Abort the in-flight turn; the next message continues the thread.

        A terminated thread has nothing to stop and never continues: 409 ``thread_terminated``.
        """
        if thread.terminated is not None:
            raise to_api_error(ThreadTerminatedError(thread.thread_id, thread.terminated))
        await thread.stop()
        return ThreadStatusOut(id=thread.thread_id, status="stopped")

    @post("/{thread_id:str}/terminate", status_code=200, responses=errors(404), summary="Terminate")
    async def terminate(self, thread: ThreadDep) -> ThreadStatusOut:
        """Abort in-flight work and reject new messages for good (idempotent)."""
        await thread.terminate()
        return ThreadStatusOut(
            id=thread.thread_id, status="terminated", terminated_at=thread.terminated
        )

    @get("/{thread_id:str}/logs", responses=errors(404), summary="Read logs")
    async def logs(
        self,
        thread: ThreadDep,
        limit: Limit = 100,
        offset: Offset = 0,
        order: FromQuery[Literal["asc", "desc"]] = "desc",
    ) -> LogsOut:
        """Log rows: model calls with tokens, latency, cost and errors."""
        logs = await thread.get_logs(limit=limit, offset=offset, order=order)
        return convert({"logs": [log.model_dump(mode="json") for log in logs]}, LogsOut)

    @get("/{thread_id:str}/children", responses=errors(404), summary="List subagents")
    async def children(self, thread: ThreadDep) -> ChildrenOut:
        """List the subagent registry: references (child thread ids), names, statuses."""
        return ChildrenOut(children=_children(thread))

    @get("/{thread_id:str}/effects", responses=errors(404), summary="List scheduled effects")
    async def effects(self, thread: ThreadDep) -> EffectsOut:
        """Pending scheduled effects."""
        pending = await thread.get_scheduled_effects()
        return convert({"effects": [e.model_dump(mode="json") for e in pending]}, EffectsOut)

    @delete(
        "/{thread_id:str}/effects/{effect_id:str}",
        responses=errors(404),
        summary="Cancel a scheduled effect",
    )
    async def cancel_effect(self, thread: ThreadDep, effect_id: FromPath[str]) -> None:
        """Cancel a pending effect."""
        if not await thread.remove_scheduled_effect(effect_id):
            raise ApiError(404, "effect_not_found", f"No pending effect {effect_id!r}.")

    @get(
        "/{thread_id:str}/variables/{request_id:str}",
        responses=errors(404),
        summary="Read a variables request",
    )
    async def variables_request(
        self, thread: ThreadDep, runtime: RuntimeDep, request_id: FromPath[str]
    ) -> VariablesRequestOut:
        """Read what a deferred subagent needs (``subagent_env_required``); never values."""
        from sa_core.engine.subagents.subagent_vars import variables_request

        found = await variables_request(runtime.store, thread.thread_id, request_id)
        if found is None:
            raise ApiError(
                404, "request_not_found", f"No pending variables request {request_id!r}."
            )
        return convert(found, VariablesRequestOut)

    @post(
        "/{thread_id:str}/variables/{request_id:str}",
        status_code=201,
        responses=errors(404, 422),
        summary="Provide variables and boot the subagent",
    )
    async def provide_variables(
        self,
        thread: ThreadDep,
        runtime: RuntimeDep,
        request_id: FromPath[str],
        data: JSONBody[ProvideVariablesIn],
    ) -> ProvideVariablesOut:
        """Store the scoped variables and start the deferred child thread."""
        from sa_core.engine.subagents.subagent_vars import variables_request

        if await variables_request(runtime.store, thread.thread_id, request_id) is None:
            raise ApiError(
                404, "request_not_found", f"No pending variables request {request_id!r}."
            )
        try:
            result = await runtime.provide_variables(thread.thread_id, request_id, data.env)
        except ConfigurationError as exc:
            raise ApiError(422, "missing_variables", str(exc)) from None
        return convert(result, ProvideVariablesOut)
