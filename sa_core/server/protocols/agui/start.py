"""Opening a run: the input checked, the thread found or created, the event stream returned."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunErrorEvent, RunStartedEvent
from ag_ui.encoder import EventEncoder
from litestar.response import Stream

from sa_core.engine.turn import clienttools
from sa_core.errors import ClientToolsError, MissingVariablesError
from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.errors import ApiError
from sa_core.server.protocols.agui.inputs import RunInput, read_input
from sa_core.server.protocols.agui.runs import Run
from sa_core.server.protocols.agui.threads import open_thread

THREAD_HEADER = "x-sa-thread-id"
"""The response header naming the thread the run is on."""
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def open_run(
    runtime: Runtime, scope: PackScope, agent: str, body: Any, accept: str | None
) -> Stream:
    """Check ``body``, open its thread and start the run; the response streaming its events.

    Raises:
        ApiError: 400 for an input this server does not take (every problem named).
    """
    given = read_input(body)
    await check_tools(runtime, scope, agent, given.tools)
    encoder = EventEncoder(accept=accept or "")
    media_type = encoder.get_content_type()
    try:
        thread, fresh = await open_thread(runtime, scope.package, agent, given.thread_id)
    except MissingVariablesError as exc:
        message = (
            f"Agent '{scope.package}/{agent}' needs variables this server does not have: "
            f"{', '.join(exc.names)}. Set them on the server, or create the thread with them "
            f"(POST /api/packages/{scope.package}/threads) and send its id as threadId."
        )
        failed = refused(encoder, given, "missing_variables", message)
        return Stream(failed, media_type=media_type, headers=SSE_HEADERS)
    run = Run(runtime, thread, given, fresh, encoder)
    headers = {THREAD_HEADER: thread.thread_id, **SSE_HEADERS}
    return Stream(run.stream(), media_type=media_type, headers=headers)


async def check_tools(
    runtime: Runtime, scope: PackScope, agent: str, tools: list[dict[str, Any]] | None
) -> None:
    """Check the frontend tools as client tools of the agent.

    Raises:
        ApiError: 400 naming each tool at fault (``tools[i].name``).
    """
    if not tools:
        return
    definition, agent_scope = scope.agent(agent)
    try:
        await clienttools.check_for(runtime.kernel, agent_scope, definition, tools, None)
    except ClientToolsError as exc:
        details = [
            f"{field.replace(clienttools.TOOLS, 'tools', 1)}: {problem}"
            for field, problem in exc.problems
        ]
        raise ApiError(
            400, "tools_refused", "The frontend tools cannot be offered: " + " ".join(details)
        ) from None


async def refused(
    encoder: EventEncoder, given: RunInput, code: str, message: str
) -> AsyncIterator[str]:
    """The events of a run that cannot start: ``RUN_STARTED``, then ``RUN_ERROR``."""
    yield encoder.encode(RunStartedEvent(thread_id=given.thread_id, run_id=given.run_id))
    yield encoder.encode(RunErrorEvent(message=message, code=code))
