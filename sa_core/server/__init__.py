"""The HTTP server: a Litestar app factory, and the types pack endpoints use.

``create_app`` and ``StandardAgentsPlugin`` import Litestar on first use; ``EndpointRequest``,
``EndpointResponse`` and ``EndpointError`` do not, so packs can import them freely.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sa_core.errors import EndpointError
from sa_core.server.endpoints import EndpointRequest, EndpointResponse

_LAZY = {"create_app": "sa_core.server.app", "StandardAgentsPlugin": "sa_core.server.app"}

__all__ = [
    "EndpointError",
    "EndpointRequest",
    "EndpointResponse",
    "StandardAgentsPlugin",
    "create_app",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sa_core.server' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


if TYPE_CHECKING:
    from sa_core.server.app import StandardAgentsPlugin, create_app
