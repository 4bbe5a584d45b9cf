"""``POST /ag-ui/{package}/{agent}``: the route, which loads ``ag_ui`` on its first request.

Before a run starts, the request is answered with the server's usual JSON errors: 401 without a
valid key (``WWW-Authenticate: Bearer``), 404 for a package the key does not open (as for one
not served) or an agent that is not an entry agent, 403 for a read-only key, 400 for a body
that is not a ``RunAgentInput`` this server takes or frontend tools the agent refuses. Anything
after that is in the event stream (``RUN_ERROR``).
"""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import FromPath
from litestar.response import Stream

from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.auth import authorize, check_key, no_package_detail
from sa_core.server.context import RuntimeDep
from sa_core.server.errors import ApiError, errors


@post(
    "/{package:str}/{agent:str}",
    status_code=200,
    summary="Run an agent (AG-UI)",
    description=(
        "The body is an AG-UI `RunAgentInput` (threadId, runId, messages, tools, state); the "
        "answer is the run's AG-UI events as server-sent events. See docs/protocols.md."
    ),
    media_type="text/event-stream",
    responses=errors(),
)
async def run_agent(
    request: Request[Any, Any, Any],
    runtime: RuntimeDep,
    package: FromPath[str],
    agent: FromPath[str],
) -> Stream:
    """Run the agent on the thread the input's ``threadId`` names; stream the run's events."""
    key = await check_key(runtime, request, allow_query=False)
    authorize(key, method=request.method, path=request.scope["path"], package=package)
    scope = served_agent(runtime, package, agent)
    try:
        body = await request.json()
    except Exception:  # noqa: BLE001 - any decoding failure is the client's
        raise ApiError(400, "invalid_input", "The request body is not valid JSON.") from None
    from sa_core.server.protocols.agui.start import open_run

    return await open_run(runtime, scope, agent, body, request.headers.get("accept"))


def served_agent(runtime: Runtime, package: str, agent: str) -> PackScope:
    """The scope of ``package`` when ``agent`` is one of its entry agents.

    Raises:
        ApiError: 404 naming what is not served.
    """
    scope = runtime.registry.scopes.get(package)
    if scope is None:
        raise ApiError(404, "not_found", no_package_detail(package))
    names = scope.pack.entry_agent_names()
    if agent not in names or agent not in scope.agents:
        raise ApiError(
            404,
            "agent_not_found",
            f"Package '{package}' has no entry agent '{agent}'; its agents here: "
            f"{', '.join(f'/ag-ui/{package}/{n}' for n in names) or 'none'}.",
        )
    return scope
