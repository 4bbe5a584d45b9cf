"""The AG-UI protocol (``pip install 'standard-agents[ag-ui]'``): ``POST /ag-ui/{package}/{agent}``.

Each entry agent is an AG-UI agent: a ``RunAgentInput`` in, the run's events out as server-sent
events, on a durable thread (see ``docs/protocols.md``). The ``ag-ui-protocol`` package gives the
types. Neither importing this package nor building the app imports it: the route
(:mod:`~sa_core.server.protocols.agui.route`) imports the modules that use it on its first
request. Without the ``ag-ui`` extra :func:`agui_router` returns None and the route is absent.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from litestar import Router

from sa_core.server.auth import PUBLIC, SECURITY
from sa_core.server.context import runtime_dependency
from sa_core.server.errors import EXCEPTION_HANDLERS

if TYPE_CHECKING:
    from sa_core.runtime import Runtime

PREFIX = "/ag-ui"
"""Where the AG-UI route is."""
MISSING = "AG-UI: not served (install the extra: pip install 'standard-agents[ag-ui]')"


def available() -> bool:
    """Whether the ``ag-ui-protocol`` package is installed."""
    return importlib.util.find_spec("ag_ui") is not None


def agui_router(runtime: Runtime) -> Router | None:
    """The ``/ag-ui`` router of ``runtime``'s entry agents, or None without the package.

    Its route checks the API key itself (the package is a path parameter), so the server's
    guard skips it.
    """
    if not available():
        return None
    from sa_core.server.protocols.agui.route import run_agent

    return Router(
        PREFIX,
        route_handlers=[run_agent],
        dependencies={"runtime": runtime_dependency(runtime)},
        exception_handlers=EXCEPTION_HANDLERS,
        security=SECURITY,
        opt={PUBLIC: True},
        tags=["AG-UI"],
    )
