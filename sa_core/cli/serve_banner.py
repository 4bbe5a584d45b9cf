"""What ``sa serve`` says at start-up, and the listening socket it binds before saying it.

Binding first means a taken port is reported (and the command exits 1) before any "Serving"
line, instead of uvicorn failing after the banner. The banner says where the API, the docs,
(when the app has a route at ``/``) the console and the other protocols served (OpenAI-compatible
at ``/v1``, MCP at ``/mcp``, A2A at ``/a2a``, AG-UI at ``/ag-ui``) are, gives a curl line to
paste, and warns about every pack model that cannot be called for want of its provider or key.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litestar import Litestar

    from sa_core.runtime import Runtime


class BindError(OSError):
    """The address could not be bound; the message names it and what to do."""


def _bind_advice(exc: OSError) -> str:
    """Why binding failed, and what to do about it."""
    if isinstance(exc, socket.gaierror) or exc.errno is None:
        return f"{exc.strerror or exc}. Check --host (an address such as 127.0.0.1 or 0.0.0.0)."
    reason = os.strerror(exc.errno)
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{reason}. Another program is using the port: pick another with --port (or stop "
            f"the other server)."
        )
    if exc.errno == errno.EACCES:
        return f"{reason}. Ports below 1024 need privileges: pick another with --port."
    return f"{reason}. Check --host and --port."


def bind(host: str, port: int) -> socket.socket:
    """Open the listening socket ``sa serve`` hands to uvicorn.

    Args:
        host: the interface (an IPv4 or IPv6 address, or a name).
        port: the port; 0 picks a free one.

    Returns:
        A bound, listening socket.

    Raises:
        BindError: the port is taken, the host is unknown, or binding is not allowed.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise BindError(f"cannot listen on {host}:{port}: {_bind_advice(exc)}") from exc
    # socket.create_server leaves the object's proto at 0, and asyncio turns Nagle off
    # (TCP_NODELAY) only on accepted sockets whose proto says TCP: without it, a kept-alive
    # response written in two parts (head, then body) waits ~40 ms for the client's delayed
    # ACK. The same descriptor, re-wrapped, reads its protocol from the kernel.
    sock = socket.socket(fileno=sock.detach())
    sock.set_inheritable(True)
    return sock


def display_host(host: str) -> str:
    """The host to put in URLs: a wildcard address becomes ``127.0.0.1``."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def has_console(app: Litestar) -> bool:
    """Whether the app serves something at ``/`` (the web console, once installed)."""
    return any(route.path == "/" for route in app.routes)


PROTOCOLS = (("OpenAI:", "/v1"), ("MCP:", "/mcp"), ("A2A:", "/a2a"), ("AG-UI:", "/ag-ui"))
"""The other protocols ``sa serve`` speaks, by banner label and URL prefix."""


def protocol_paths(app: Litestar) -> list[tuple[str, str]]:
    """``(label, prefix)`` of each protocol the app serves (an optional SDK may be missing)."""
    paths = [route.path for route in app.routes]
    return [
        (label, prefix)
        for label, prefix in PROTOCOLS
        if any(path == prefix or path.startswith(prefix + "/") for path in paths)
    ]


def missing_key_warnings(runtime: Runtime) -> list[str]:
    """One warning per pack model that a turn could not call: no provider, or no key.

    Keys are looked up as a model call would without a thread: the runtime's env, then the
    process environment.
    """
    from sa_core.provider_check import describe_missing, model_keys

    def lookup(name: str) -> str | None:
        return runtime.env.get(name) or os.environ.get(name)

    packs = [scope.pack for scope in runtime.registry.scopes.values()]
    entries = model_keys(packs, runtime.providers, lookup)
    return [describe_missing(entry) for entry in entries if entry.missing]


def real_model_keys(runtime: Runtime) -> list[str]:
    """The key variables the served models' real providers need and that are not set.

    Under ``--test-provider`` the runtime answers every model offline; its plugin host still
    holds the providers the models name, so this says which keys serving them for real needs.
    """
    from sa_core.provider_check import model_keys

    def lookup(name: str) -> str | None:
        return runtime.env.get(name) or os.environ.get(name)

    packs = [scope.pack for scope in runtime.registry.scopes.values()]
    entries = model_keys(packs, runtime.host.providers, lookup)
    keys: list[str] = []
    for entry in entries:
        if entry.variable is not None and not entry.present and entry.variable not in keys:
            keys.append(entry.variable)
    return keys


def offline_lines(runtime: Runtime, option: bool | str) -> list[str]:
    """The banner's lines under ``--test-provider``: models are offline, and how to leave.

    Args:
        runtime: the runtime being served (for the keys its models need).
        option: the ``--test-provider`` value (``True``, or a script path).

    Returns:
        A ``Models:`` line and a ``Real models:`` line.
    """
    from sa_core.cli.offline_option import describe_offline

    keys = real_model_keys(runtime)
    if keys:
        how = "export " + " ".join(f"{key}=..." for key in keys) + " and run make serve again"
    else:
        how = "run make serve again"
    return [
        f"  Models:  offline. {describe_offline(option)}",
        f"  Real models: {how} (with sa serve, leave out --test-provider).",
    ]


def banner(
    app: Litestar,
    runtime: Runtime,
    host: str,
    port: int,
    token: str | None = None,
    offline: bool | str = False,
) -> list[str]:
    """The start-up lines: where everything is and a curl to paste.

    Args:
        app: the app being served.
        runtime: its runtime (for the package names).
        host: the bound host.
        port: the bound port.
        token: the API key created at this start, if any (it goes into the curl line).
        offline: the ``--test-provider`` value; when set, the lines say every model answers
            offline and how to switch to real models.

    Returns:
        The lines to print; the first starts with ``Serving packages``.
    """
    base = f"http://{display_host(host)}:{port}"
    names = ", ".join(runtime.registry.scopes) or "none"
    lines = [
        f"Serving packages {names} at {base}/api/packages",
        f"  API:     {base}/api/packages",
        f"  Docs:    {base}/schema",
    ]
    if has_console(app):
        lines.append(f"  Console: {base}/")
    lines += [f"  {label:<8} {base}{path}" for label, path in protocol_paths(app)]
    if offline is not False:
        lines += offline_lines(runtime, offline)
    key = token or "$SA_API_KEY"
    lines.append("Try it:")
    lines.append(f'  curl -H "Authorization: Bearer {key}" {base}/api/packages')
    if token is None:
        lines.append("  (set SA_API_KEY to one of your keys; 'sa keys create' makes a new one)")
    return lines
