"""The web console at ``/`` and the locally served assets of the API docs at ``/schema``.

The console is one static page (``static/index.html``) with plain JavaScript modules (no build
step, no framework) that talk to the JSON API under ``/api`` with the key the person signs in
with, and to the server-sent event streams for live updates. Everything it loads is served from
``/_sa/static/``: nothing comes from a CDN, so the console and the docs work offline. The docs'
Swagger UI and Redoc bundles are vendored from npm (versions and licenses in
``static/vendor/NOTICE``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Response, get
from litestar.openapi.plugins import OpenAPIRenderPlugin, RedocRenderPlugin, SwaggerRenderPlugin
from litestar.response import File
from litestar.router import Router
from litestar.static_files import create_static_files_router
from litestar.types import ControllerRouterHandler

STATIC_DIR = Path(__file__).parent / "static"
"""The console's shipped assets (package data)."""

STATIC_PATH = "/_sa/static"
"""The URL prefix the assets are served under."""

_FAVICON = f"<link rel='icon' type='image/svg+xml' href='{STATIC_PATH}/favicon.svg'>"
_NO_CACHE = {"Cache-Control": "no-cache"}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
"""The console page's policy: it may load and contact nothing but its own server."""


@get("/", include_in_schema=False, sync_to_thread=False, name="sa_console")
def console_page() -> File:
    """The console's single page (it asks for the API key itself)."""
    return File(
        STATIC_DIR / "index.html",
        content_disposition_type="inline",
        media_type="text/html; charset=utf-8",
        headers={**_NO_CACHE, "Content-Security-Policy": CONTENT_SECURITY_POLICY},
    )


@get("/favicon.ico", include_in_schema=False, sync_to_thread=False, name="sa_favicon")
def favicon() -> Response[bytes]:
    """The console's icon, for browsers that ask for ``/favicon.ico``."""
    return Response(
        (STATIC_DIR / "favicon.svg").read_bytes(), media_type="image/svg+xml", headers=_NO_CACHE
    )


def static_router() -> Router:
    """The router serving the console's and the docs' assets (no key needed)."""
    return create_static_files_router(
        STATIC_PATH, directories=[STATIC_DIR], name="sa_static", include_in_schema=False
    )


def console_handlers() -> list[ControllerRouterHandler]:
    """The console's page, its icon and its assets."""
    return [console_page, favicon, static_router()]


def docs_render_plugins(**options: Any) -> list[OpenAPIRenderPlugin]:
    """Swagger UI (at ``/schema`` and ``/schema/swagger``) and Redoc with local assets.

    Pass these to ``OpenAPIConfig(render_plugins=...)`` and serve :func:`static_router` to get
    API docs that work without internet access.
    """
    vendor = f"{STATIC_PATH}/vendor"
    return [
        SwaggerRenderPlugin(
            js_url=f"{vendor}/swagger-ui/swagger-ui-bundle.js",
            css_url=f"{vendor}/swagger-ui/swagger-ui.css",
            standalone_preset_js_url=f"{vendor}/swagger-ui/swagger-ui-standalone-preset.js",
            path=["/", "/swagger"],
            favicon=_FAVICON,
            **options,
        ),
        RedocRenderPlugin(
            js_url=f"{vendor}/redoc/redoc.standalone.js",
            google_fonts=False,
            path="/redoc",
            favicon=_FAVICON,
            **options,
        ),
    ]
