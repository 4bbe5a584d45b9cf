"""The OpenAI-compatible API under ``/v1``: models, chat completions and responses.

A thin adapter over :class:`~sa_core.runtime.Runtime` and
:class:`~sa_core.state.ThreadState`: each model is an entry agent (``{package}/{agent}``), each
request one turn of that agent on a durable thread. See ``docs/protocols.md``.
"""

from __future__ import annotations

from litestar import Router

from sa_core.runtime import Runtime
from sa_core.server.auth import PUBLIC, SECURITY
from sa_core.server.context import runtime_dependency
from sa_core.server.protocols.openai.chat import chat_completions
from sa_core.server.protocols.openai.errors import EXCEPTION_HANDLERS
from sa_core.server.protocols.openai.responses import create_response, get_response
from sa_core.server.protocols.openai.routes import (
    list_models,
    retrieve_model,
    retrieve_model_by_id,
)
from sa_core.server.protocols.openai.settings import POLICY_OPT
from sa_core.spec.agents import ClientSettingsPolicy

__all__ = ["openai_router"]


def openai_router(
    runtime: Runtime, path: str = "/v1", *, client_settings: ClientSettingsPolicy = "apply"
) -> Router:
    """The ``/v1`` router serving ``runtime``'s entry agents as OpenAI models.

    Its routes check the API key themselves (to answer in OpenAI's error shape), so the
    server's guard skips them. ``client_settings`` is what a model does with a client's
    sampling and length settings when its agent's ``serving.client_settings`` is unset.
    """
    return Router(
        path,
        route_handlers=[
            list_models,
            retrieve_model,
            retrieve_model_by_id,
            chat_completions,
            create_response,
            get_response,
        ],
        dependencies={"runtime": runtime_dependency(runtime)},
        exception_handlers=EXCEPTION_HANDLERS,
        security=SECURITY,
        opt={PUBLIC: True, POLICY_OPT: client_settings},
        tags=["OpenAI-compatible"],
    )
