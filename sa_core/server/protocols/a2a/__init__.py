"""The A2A protocol server (``pip install 'standard-agents[a2a]'``), built on ``a2a-sdk``.

Importing this package does not import the SDK: :func:`a2a_server` does, and returns None
when the ``a2a`` extra is not installed (the routes are then absent).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sa_core.runtime import Runtime
    from sa_core.server.protocols.a2a.mount import A2AServer

MISSING = "A2A: not served (install the extra: pip install 'standard-agents[a2a]')"


def available() -> bool:
    """Whether the A2A SDK (with its HTTP server parts) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("a2a", "starlette"))


def a2a_server(runtime: Runtime) -> A2AServer | None:
    """The A2A endpoints of ``runtime``'s entry agents, or None without the SDK."""
    if not available():
        return None
    from sa_core.server.protocols.a2a.mount import A2AServer

    return A2AServer(runtime)
