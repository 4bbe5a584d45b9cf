"""ThreadEndpointDefinition: a custom HTTP route on a thread, mounted by the server."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, model_validator

from sa_core.spec.base import DEFERRED, SpecModel

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class ThreadEndpointDefinition(SpecModel):
    """A thread endpoint.

    Mounted at ``/api/packages/{package}/threads/{id}/{path}``. ``path`` may hold parameters in
    braces (``items/{item_id}``). ``handler(request, state)`` (sync or async) receives an
    ``EndpointRequest`` (method, path params, query, headers, body) and the ``ThreadState``; it
    returns a dict/list (JSON), a str (text), bytes, or an ``EndpointResponse``.
    """

    model_config = DEFERRED

    name: str = ""
    path: str
    method: HttpMethod = "GET"
    handler: Callable[..., Any] = Field(exclude=True)
    description: str = ""
    public: bool = False

    @model_validator(mode="after")
    def _default_name(self) -> ThreadEndpointDefinition:
        self.path = self.path.strip("/")
        if not self.name:
            slug = re.sub(r"[^a-zA-Z0-9]+", "_", self.path).strip("_") or "index"
            self.name = f"{self.method.lower()}_{slug}"
        return self


def define_thread_endpoint(
    *,
    path: str,
    handler: Callable[..., Any],
    method: HttpMethod = "GET",
    name: str = "",
    description: str = "",
    public: bool = False,
) -> ThreadEndpointDefinition:
    """Define a thread endpoint."""
    return ThreadEndpointDefinition(
        name=name, path=path, method=method, handler=handler, description=description, public=public
    )
