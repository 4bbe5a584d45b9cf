"""``GET /v1/models``, ``GET /v1/models/{package}/{agent}`` and ``.../{package}:{agent}``."""

from __future__ import annotations

import time
from typing import Any

from litestar import Request, get
from litestar.params import FromPath

from sa_core.server.context import RuntimeDep
from sa_core.server.protocols.openai.errors import error_specs
from sa_core.server.protocols.openai.models import all_models, model_object, resolve_model
from sa_core.server.protocols.openai.threads import authenticate

STARTED = int(time.time())


@get("/models", summary="List models", responses=error_specs())
async def list_models(request: Request[Any, Any, Any], runtime: RuntimeDep) -> dict[str, Any]:
    """Every entry agent of every package the key opens, as a model ``{package}/{agent}``."""
    key = await authenticate(runtime, request)
    models = all_models(runtime, key)
    return {"object": "list", "data": [model_object(m, STARTED) for m in models]}


@get("/models/{package:str}/{agent:str}", summary="Retrieve a model", responses=error_specs(404))
async def retrieve_model(
    request: Request[Any, Any, Any],
    runtime: RuntimeDep,
    package: FromPath[str],
    agent: FromPath[str],
) -> dict[str, Any]:
    """One model (``{package}/{agent}``); 404 when the package has no such entry agent."""
    key = await authenticate(runtime, request)
    model = resolve_model(runtime, f"{package}/{agent}", unknown_status=404, key=key)
    return model_object(model, STARTED)


@get("/models/{model_id:str}", summary="Retrieve a model by its id without '/'",
     responses=error_specs(404))  # fmt: skip
async def retrieve_model_by_id(
    request: Request[Any, Any, Any], runtime: RuntimeDep, model_id: FromPath[str]
) -> dict[str, Any]:
    """One model by ``{package}:{agent}``, answered under that id; 404 when there is none."""
    key = await authenticate(runtime, request)
    model = resolve_model(runtime, model_id, param="model_id", unknown_status=404, key=key)
    return {**model_object(model, STARTED), "id": model_id}
