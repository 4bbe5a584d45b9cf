"""The app factory: ``create_app(runtime)``, and the plugin that embeds the API in any app.

Every package gets its own router at ``/api/packages/{package}``, mounted once the runtime has
loaded its packs (at startup), so the OpenAPI schema names each package's routes and the pack
endpoints it defines. Embed the API in your own Litestar app with the plugin::

    app = Litestar(route_handlers=[...], plugins=[StandardAgentsPlugin(runtime)])
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Router
from litestar.config.app import AppConfig
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins import InitPluginProtocol

from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.auth import COMPONENTS, SECURITY, api_key_guard
from sa_core.server.console import console_handlers, docs_render_plugins, static_router
from sa_core.server.context import package_dependencies, runtime_dependency
from sa_core.server.corners import (
    allow_header_middleware,
    package_route_detail,
    unknown_package_websocket,
)
from sa_core.server.errors import EXCEPTION_HANDLERS, exception_handlers
from sa_core.server.health import health_handler, routes_health
from sa_core.server.protocols.mcp import mcp_handlers
from sa_core.server.protocols.openai import openai_router
from sa_core.server.request import ApiRequest
from sa_core.server.routes.approvals import ApprovalsController
from sa_core.server.routes.catalog import CatalogController, list_packages
from sa_core.server.routes.custom import endpoint_handlers
from sa_core.server.routes.evals import EvalsController
from sa_core.server.routes.files import FilesController
from sa_core.server.routes.forks import ForksController
from sa_core.server.routes.graph import GraphController
from sa_core.server.routes.keys import KeysController
from sa_core.server.routes.messages import MessagesController
from sa_core.server.routes.queue import QueueController
from sa_core.server.routes.replay import ReplayController
from sa_core.server.routes.schedules import SchedulesController
from sa_core.server.routes.store import StoreController
from sa_core.server.routes.threads import ThreadsController
from sa_core.server.routes.usage import UsageController
from sa_core.server.streaming import StreamController, StreamHub
from sa_core.spec.agents import ClientSettingsPolicy

API_DESCRIPTION = """\
The Standard Agents HTTP API. Every route needs `Authorization: Bearer <key>` (manage keys with
`sa keys`). Each hosted package lives under `/api/packages/{package}/`; a thread is reachable
only under its own package. Errors are `{"error": code, "detail": text}`.
"""


class FreshRouter(Router):
    """A router built for one registration: registering it does not deep-copy it.

    Litestar deep-copies every ``Router`` it registers, so that one router object can be
    mounted in several places; a package's router is built anew for each mount, and the copy of
    its handlers (about 80, with their parsed signatures) cost a tenth of ``sa serve``'s start.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> FreshRouter:
        return self


class StandardAgentsPlugin(InitPluginProtocol):
    """Adds the Standard Agents API to a Litestar app.

    Args:
        runtime: the runtime whose packs and threads the API serves.
        manage_runtime: start the runtime at app startup (unless it already runs) and close it
            at shutdown; pass False to keep a runtime you start and close yourself.
        ui: serve the web console at ``/`` (its assets, and the docs' assets, under
            ``/_sa/static``).
        client_settings: what the OpenAI-compatible API does with a client's sampling and
            length settings for agents whose ``serving.client_settings`` is unset: ``apply``,
            ``ignore`` or ``refuse`` (see docs/protocols.md).
        health: serve the readiness route ``GET /health`` (no key needed; see
            :mod:`sa_core.server.health`), unless the app routes ``/health`` itself.

    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        manage_runtime: bool = True,
        ui: bool = True,
        client_settings: ClientSettingsPolicy = "apply",
        health: bool = True,
    ) -> None:
        self.runtime = runtime
        self.manage_runtime = manage_runtime
        self.ui = ui
        self.health = health
        self.client_settings: ClientSettingsPolicy = client_settings
        self.hub = StreamHub()
        self._guard = api_key_guard(runtime)
        self._mounted: set[str] = set()

    def _layer(self, package: str | None = None) -> dict[str, Any]:
        """Return the settings shared by every router of the API (of ``package``'s, if given).

        A package's router has a guard of its own, so a key that does not open the package
        gets 404 on each of its routes (:func:`~sa_core.server.auth.authorize`).
        """

        async def provide_hub() -> StreamHub:
            return self.hub

        guard = self._guard if package is None else api_key_guard(self.runtime, package)
        return {
            "guards": [guard],
            "middleware": [allow_header_middleware],
            "security": SECURITY,
            "exception_handlers": EXCEPTION_HANDLERS,
            "request_class": ApiRequest,
            "dependencies": {
                "runtime": runtime_dependency(self.runtime),
                "hub": Provide(provide_hub, use_cache=True),
            },
        }

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        """Register the package list, the lifecycle hooks and the security scheme."""
        app_config.route_handlers.append(
            FreshRouter(
                "/",
                route_handlers=[
                    list_packages,
                    KeysController,
                    unknown_package_websocket(self.runtime),
                    *mcp_handlers(self.runtime, self.hub),
                ],
                **self._layer(),
            )
        )
        app_config.route_handlers.append(
            openai_router(self.runtime, client_settings=self.client_settings)
        )
        if self.health and not routes_health(app_config.route_handlers):
            app_config.route_handlers.append(health_handler(self.runtime))
        if self.ui:
            app_config.route_handlers.extend(console_handlers())
        elif app_config.openapi_config is not None:
            app_config.route_handlers.append(static_router())
        app_config.on_startup.append(self.startup)
        app_config.on_shutdown.append(self.shutdown)
        from sa_core.server.protocols.a2a import a2a_server

        if (a2a := a2a_server(self.runtime)) is not None:  # the A2A endpoints at /a2a
            app_config.route_handlers.append(a2a.handler())
            app_config.on_startup.append(a2a.start)  # after the runtime's start
            app_config.on_shutdown.insert(0, a2a.push.aclose)  # before the runtime's close
            app_config.on_shutdown.append(a2a.aclose)
        from sa_core.server.protocols.agui import agui_router

        if (agui := agui_router(self.runtime)) is not None:  # AG-UI at /ag-ui/{package}/{agent}
            app_config.route_handlers.append(agui)
        openapi = app_config.openapi_config
        if openapi is not None:
            existing = openapi.components
            listed = existing if isinstance(existing, list) else [existing]
            openapi.components = [*listed, COMPONENTS]
        return app_config

    def package_router(self, scope: PackScope) -> Router:
        """Build one package's router: catalog, threads, messages, files, schedules, streams...

        A new router each call: mount each one once.
        """
        layer = self._layer(scope.package)
        layer["dependencies"].update(package_dependencies(scope, self.runtime))
        return FreshRouter(
            f"/api/packages/{scope.package}",
            route_handlers=[
                CatalogController,
                GraphController,
                ThreadsController,
                ReplayController,
                UsageController,
                ApprovalsController,
                MessagesController,
                FilesController,
                ForksController,
                QueueController,
                SchedulesController,
                StoreController,
                EvalsController,
                StreamController,
                *endpoint_handlers(scope),
                *mcp_handlers(self.runtime, self.hub, scope.package),
            ],
            tags=[scope.package],
            **layer,
        )

    async def startup(self, app: Litestar) -> None:
        """Start the runtime if needed, then mount a router per package."""
        if self.manage_runtime and not self.runtime.is_open:
            await self.runtime.start()
        for scope in self.runtime.registry.scopes.values():
            if scope.package not in self._mounted:
                app.register(self.package_router(scope))
                self._mounted.add(scope.package)

    async def shutdown(self, app: Litestar) -> None:
        """End open streams; close the runtime (in-flight turns stop; queued work stays)."""
        self.hub.close_all()
        if self.manage_runtime:
            await self.runtime.close()


def create_app(
    runtime: Runtime,
    *,
    manage_runtime: bool = True,
    docs: bool = True,
    ui: bool = True,
    debug: bool = False,
    title: str = "Standard Agents",
    client_settings: ClientSettingsPolicy = "apply",
) -> Litestar:
    """Build the Litestar app serving ``runtime``'s packs.

    Args:
        runtime: the runtime to serve.
        manage_runtime: start the runtime at startup (unless it already runs) and close it at
            shutdown.
        docs: serve the OpenAPI schema (``/schema/openapi.json``) and the interactive docs
            (``/schema/swagger``, ``/schema/redoc``, ``/schema``); these need no key and load
            their scripts from this server, never from a CDN.
        ui: serve the web console at ``/`` (it asks for an API key in the browser).
        debug: Litestar's debug mode (tracebacks in 500 answers; never in production).
        title: the OpenAPI title.
        client_settings: the OpenAI-compatible API's default for a client's sampling and
            length settings (``apply``, ``ignore`` or ``refuse``); an agent's own
            ``serving.client_settings`` wins.

    Returns:
        The app; run it with any ASGI server (``sa serve`` uses uvicorn).

    """
    from sa_core import __version__

    openapi = (
        OpenAPIConfig(
            title=title,
            version=__version__,
            description=API_DESCRIPTION,
            render_plugins=docs_render_plugins(),
            use_handler_docstrings=True,
        )
        if docs
        else None
    )
    return Litestar(
        plugins=[
            StandardAgentsPlugin(
                runtime, manage_runtime=manage_runtime, ui=ui, client_settings=client_settings
            )
        ],
        openapi_config=openapi,
        exception_handlers=exception_handlers(package_route_detail(runtime)),
        debug=debug,
    )
