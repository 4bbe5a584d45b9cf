"""Export, import and replay a thread tree (``sa-thread/1``; see docs/time-travel.md)."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Controller, get, post
from litestar.params import JSONBody

from sa_core.server.context import PackDep, RuntimeDep, ThreadDep, thread_row
from sa_core.server.errors import ApiError, errors
from sa_core.server.routes.threads import thread_out
from sa_core.server.schemas import Base, ThreadOut


class ReplayIn(Base, kw_only=True):
    """How to replay.

    ``tools``: ``recorded`` (their recorded results) or ``execute`` (run again);
    ``stop_at_first``: stop at the first divergence, or go on and report them all.
    """

    tools: Literal["recorded", "execute"] = "recorded"
    stop_at_first: bool = True


class DivergenceOut(Base, kw_only=True):
    """Where the replay did not do what the recording did."""

    kind: str
    path: str
    ordinal: int | None = None
    summary: str
    diff: str = ""


class ReplayOut(Base, kw_only=True):
    """``POST threads/{id}/replay``: identical, or the first divergence (and every one found)."""

    identical: bool
    divergence: DivergenceOut | None = None
    divergences: list[DivergenceOut]
    source_thread_id: str
    thread_id: str
    tools: str
    model_calls: int
    tool_results_served: int
    tool_executions: int


class ReplayController(Controller):
    """A thread tree as a portable document, and its replay."""

    path = "/threads"

    @get("/{thread_id:str}/export", responses=errors(404), summary="Export a thread tree")
    async def export_thread(self, thread: ThreadDep) -> dict[str, Any]:
        """The thread and its children as an ``sa-thread/1`` document (secret values left out).

        Messages, logs with the recorded model calls, files (base64), values, the subagent
        registry and the children, recursively.
        """
        return await thread.export()

    @post("/import", status_code=201, responses=errors(422), summary="Import a thread tree")
    async def import_thread(
        self, data: JSONBody[dict[str, Any]], pack: PackDep, runtime: RuntimeDep
    ) -> ThreadOut:
        """Recreate an exported document as a new tree of this package; the new root thread.

        422 ``thread_document`` lists every problem: not an ``sa-thread/1`` document, a root of
        another package, agents this server lacks.
        """
        root = data.get("thread") if isinstance(data, dict) else None
        package = root.get("package") if isinstance(root, dict) else None
        if package is not None and package != pack.package:
            raise ApiError(
                422,
                "thread_document",
                f"The document's thread belongs to package {package!r}; import it under "
                f"/api/packages/{package}/threads/import.",
            )
        thread = await runtime.import_thread(data)
        return thread_out(runtime, pack, thread_row(thread))

    @post(
        "/{thread_id:str}/replay",
        status_code=200,
        responses=errors(404, 422),
        summary="Replay a thread from its recording",
    )
    async def replay_thread(
        self, thread: ThreadDep, runtime: RuntimeDep, data: JSONBody[ReplayIn | None] = None
    ) -> ReplayOut:
        """Run the thread again on a new thread, every model answer served from its recording.

        Answers when the replay is done: ``identical``, or the first ``divergence`` (its kind,
        thread path, ordinal and a readable diff). 422 ``thread_document`` when the thread's
        model calls were not recorded.
        """
        options = data or ReplayIn()
        report = await runtime.replay_thread(
            thread.thread_id, tools=options.tools, stop_at_first=options.stop_at_first
        )
        found = report.to_json()
        return ReplayOut(
            identical=report.identical,
            divergence=None if report.divergence is None else DivergenceOut(**found["divergence"]),
            divergences=[DivergenceOut(**d) for d in found["divergences"]],
            source_thread_id=report.source_thread_id,
            thread_id=report.thread_id,
            tools=report.tools,
            model_calls=report.model_calls,
            tool_results_served=report.tool_results_served,
            tool_executions=report.tool_executions,
        )
