"""``sa serve``: host every installed pack (and the ones named) over HTTP with uvicorn.

Each package is served under ``/api/packages/{package}/``; the OpenAPI schema is at
``/schema/openapi.json`` and the interactive docs at ``/schema``. The first start on a database
that never had an API key creates one and prints it once, with a curl line that uses it. The
port is bound before anything else, so a taken port is an error (exit 1) before any "Serving"
line; every pack model whose provider or key is missing is warned about at start-up (see
:mod:`sa_core.cli.serve_banner`).

``--workers N`` starts N worker processes sharing the port (PostgreSQL only): see
:mod:`sa_core.cli.workers` and ``docs/deployment.md``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import TYPE_CHECKING, Any

from sa_core.cli.offline_option import add_test_provider_option

if TYPE_CHECKING:
    import asyncio


def register(subparsers: Any) -> None:
    """Add the ``serve`` command to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve packs over HTTP",
        description=(
            "Serve every installed pack, plus the ones named with --pack, under "
            "/api/packages/{package}/. Every route needs 'Authorization: Bearer <key>'."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    add_test_provider_option(parser)
    parser.add_argument(
        "--db", metavar="URL", default=None, help="database URL (default sqlite:///.sa/sa.db)"
    )
    parser.add_argument(
        "--pack",
        dest="packs",
        action="append",
        default=[],
        metavar="MODULE_OR_PATH",
        help="also serve the packs of a module, module:attribute, .py file or project directory "
        "(repeatable)",
    )
    parser.add_argument(
        "--no-ui",
        dest="ui",
        action="store_false",
        help="do not serve the web console at / (the API and the docs stay)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes sharing the port (1); more than one needs a postgresql:// --db",
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=None,
        metavar="S",
        help="with PostgreSQL: seconds before a dead worker's threads are taken over (10)",
    )
    parser.add_argument(
        "--public-url",
        default=None,
        metavar="URL",
        help="the URL other servers reach this one at; remote A2A agents that push then send "
        "their task notifications to it",
    )
    parser.add_argument(
        "--client-settings",
        default="apply",
        choices=["apply", "ignore", "refuse"],
        help="what the OpenAI-compatible API (/v1) does with a client's temperature, "
        "max_tokens, ... for agents whose serving policy does not say (apply)",
    )
    parser.add_argument(
        "--record",
        dest="record",
        action="store_true",
        default=None,
        help="record each model call's request hash and full answer, so threads served can be "
        "exported and replayed (the default; wins over STANDARD_AGENTS_RECORD_MODEL_CALLS=0; "
        "see docs/time-travel.md)",
    )
    parser.add_argument(
        "--no-record",
        dest="record",
        action="store_false",
        help="record no model calls (threads served cannot be replayed)",
    )
    parser.add_argument("--worker-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log level of the server and the libraries it uses (info)",
    )
    parser.set_defaults(func=run, loop_factory=responsive_loop, interruptible=True)


def responsive_loop() -> asyncio.AbstractEventLoop:
    """The event loop ``sa serve`` runs in: requests and streams before background turns."""
    from sa_core.server.eventloop import ResponsiveEventLoop

    return ResponsiveEventLoop()


async def run(args: argparse.Namespace) -> int:
    """Serve: in this process (:func:`serve_one`), or in ``--workers N`` worker processes."""
    if args.lease_seconds is not None:
        if args.lease_seconds <= 0:
            print("error: --lease-seconds must be a positive number of seconds", file=sys.stderr)
            return 2
        os.environ["SA_LEASE_SECONDS"] = str(args.lease_seconds)
    if args.public_url is not None:
        if not args.public_url.startswith(("http://", "https://")):
            print("error: --public-url must be an http:// or https:// URL", file=sys.stderr)
            return 2
        os.environ["SA_PUBLIC_URL"] = args.public_url.rstrip("/")  # workers inherit it
    if args.record is not None:  # the model caller reads it when built (workers inherit it)
        os.environ["STANDARD_AGENTS_RECORD_MODEL_CALLS"] = "1" if args.record else "0"
    if args.workers != 1 and args.worker_fd is None:
        from sa_core.cli.workers import serve_workers

        return await serve_workers(args)
    # start-up allocates what lives as long as the process: the collector's passes over it free
    # nothing, so it is paused until freeze_startup_heap
    gc.disable()
    try:
        return await serve_one(args)
    finally:
        gc.enable()


async def serve_one(args: argparse.Namespace) -> int:
    """Bind, load the packs, start the runtime, print a first key if needed, and serve."""
    from sa_core.cli.serve_banner import BindError, banner, bind, missing_key_warnings

    if args.worker_fd is not None:  # a worker of `sa serve --workers N`: the parent bound it
        import socket

        sock = socket.socket(fileno=args.worker_fd)
    else:
        try:
            sock = bind(args.host, args.port)  # first, so a taken port fails before the rest
        except BindError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    try:
        from sa_core.packloader import load_packs_from
        from sa_core.runtime import Runtime
        from sa_core.server import create_app
        from sa_core.server.auth import ensure_first_key
        from sa_core.server.runner import build_server, websocket_protocol

        packs = [pack for target in args.packs for pack in load_packs_from(target)]
    except BaseException:
        sock.close()
        raise
    runtime = Runtime(packs=packs, database_url=args.db, offline=args.test_provider)
    try:
        await runtime.start()
        for error in runtime.pack_errors:
            print(f"warning: {error}", file=sys.stderr)
        token = await ensure_first_key(runtime.store)
        if token is not None:
            announce_first_key(token)
        elif await runtime.store.count_api_keys() == 0:
            print(
                "warning: every API key of this database is revoked, so every request will be "
                "refused; create one with 'sa keys create"
                + (f" --db {args.db}" if args.db else "")
                + "'.",
                file=sys.stderr,
            )
        if websocket_protocol() == "none":
            print(
                "warning: no WebSocket library is installed (pip install websockets); "
                "the /ws routes will refuse upgrades. Server-sent events still work.",
                file=sys.stderr,
            )
        from sa_core.server.protocols.mcp import mcp_unavailable

        if (reason := mcp_unavailable()) is not None:
            print(f"note: {reason}", file=sys.stderr)
        for warning in missing_key_warnings(runtime):
            print(
                f"warning: model {warning}, so its turns will fail; set the key, or serve "
                f"with --test-provider.",
                file=sys.stderr,
                flush=True,
            )
        app = create_app(runtime, ui=args.ui, client_settings=args.client_settings)
        from sa_core.server.protocols import a2a

        if not a2a.available():
            print(a2a.MISSING, flush=True)
        from sa_core.server.protocols import agui

        if not agui.available():
            print(agui.MISSING, flush=True)
        port = sock.getsockname()[1]
        lines = banner(app, runtime, args.host, port, token, offline=args.test_provider)
        print("\n".join(lines), flush=True)
        server = build_server(app, args.host, port, log_level=args.log_level)
        freeze_startup_heap()
        await server.serve(sockets=[sock])
        return 0 if server.started else 1
    finally:
        sock.close()
        await runtime.close()


def freeze_startup_heap() -> None:
    """Move every object alive after start-up out of the garbage collector's reach, resume it.

    Modules, pack definitions, the app and its routes live as long as the process; the cyclic
    collector's full passes would otherwise walk them all (about a hundred thousand objects)
    every few hundred turns. Frozen objects are still freed by reference counting; only the
    cycle search skips them (``gc.freeze``: they move to a permanent generation that no
    collection visits). :func:`run` pauses the collector through start-up; this resumes it.
    """
    gc.collect()
    gc.freeze()
    gc.enable()


def announce_first_key(token: str) -> None:
    """Print the API key created on first start (the only time it is ever shown)."""
    print(
        "Created API key 'default'. It is shown only this once; keep it safe:\n\n"
        f"    {token}\n\n"
        "Send it as 'Authorization: Bearer <key>'. Manage keys with 'sa keys'.",
        flush=True,
    )
