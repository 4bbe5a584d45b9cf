"""HTTP for remote A2A agents: a client carrying an agent's headers, and failures classified.

The engine's remote-agent modules (``sa_core/engine/remote/``) talk to other servers
through these helpers, so that neither ``httpx`` (about 130 modules) nor the a2a-sdk is
imported until a remote agent is first used: a runtime that calls none keeps its start-up
imports, and its heap, as they were. Nothing here knows about threads or the engine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any, Literal
from urllib.parse import urlsplit

Failure = Literal["auth", "timeout", "network", "other"]


class DownloadError(Exception):
    """A file could not be downloaded; the message says why (never the URL's query)."""


def new_client(headers: dict[str, str], connect: float, read: float | None) -> Any:
    """An ``httpx.AsyncClient`` sending ``headers``; ``read=None`` lets streams stay silent.

    Redirects are not followed, so headers never go to another URL than the one asked.
    """
    import httpx

    timeout = httpx.Timeout(connect, read=read)
    return httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a failed response behind ``exc`` (itself or its cause), if any."""
    import httpx

    for found in (exc, exc.__cause__):
        if isinstance(found, httpx.HTTPStatusError):
            return found.response.status_code
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def failure(exc: BaseException) -> tuple[Failure, str]:
    """What kind of failure ``exc`` is, and its detail (the underlying error's text).

    ``auth``: HTTP 401 or 403; ``timeout``: a request timed out; ``network``: the server could
    not be reached (or the connection broke); ``other``: anything else (the remote's error).
    """
    import httpx
    from a2a.client.errors import A2AClientTimeoutError

    cause = exc.__cause__
    if http_status(exc) in (401, 403):
        return "auth", str(http_status(exc))
    if isinstance(exc, A2AClientTimeoutError | httpx.TimeoutException | TimeoutError):
        return "timeout", str(exc)
    for found in (exc, cause):
        if isinstance(found, httpx.RequestError):
            return "network", str(found) or type(found).__name__
    return "other", str(exc) or type(exc).__name__


def shown_url(url: str) -> str:
    """``scheme://host:port/path`` of a URL: no credentials, query or fragment (may be keys)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def _blocked(address: str) -> bool:
    """Whether an address is not a public unicast one (loopback, private, link-local...)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return True
    mapped = getattr(ip, "ipv4_mapped", None)
    ip = mapped if mapped is not None else ip
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified


async def public_host(url: str) -> bool:
    """Whether every address the URL's host resolves to is public (False: unresolvable)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname, port, type=socket.SOCK_STREAM
        )
    except OSError:
        return False
    return bool(infos) and not any(_blocked(str(info[4][0])) for info in infos)


async def _body(response: Any, limit: int) -> bytes:
    """The bytes of a streamed response: a 2xx one, at most ``limit`` bytes."""
    status = response.status_code
    if status >= 300:
        raise DownloadError(
            f"HTTP {status}, {'a redirect (not followed)' if status < 400 else 'an error'}"
        )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise DownloadError(f"{declared} bytes, over the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise DownloadError(f"over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def download(url: str, headers: dict[str, str], limit: int, seconds: float) -> bytes:
    """GET a file's bytes: at most ``limit`` bytes, within ``seconds`` in all.

    Redirects are not followed (headers must not go to another URL than the one asked). The
    request goes through an ``httpx`` transport, not a client, so the client's request log
    line, which holds the whole URL, is not written (a signed URL's query is a key).

    Raises:
        DownloadError: HTTP error, redirect, too big, timed out or unreachable.
    """
    import httpx

    timeout = httpx.Timeout(seconds).as_dict()
    request = httpx.Request("GET", url, headers=headers, extensions={"timeout": timeout})
    try:
        async with asyncio.timeout(seconds), httpx.AsyncHTTPTransport() as transport:
            response = await transport.handle_async_request(request)
            try:
                return await _body(response, limit)
            finally:
                await response.aclose()
    except (TimeoutError, httpx.TimeoutException):
        raise DownloadError(f"not downloaded within {seconds:g} seconds") from None
    except httpx.HTTPError as exc:
        raise DownloadError(f"{type(exc).__name__}: the server could not be reached") from None


__all__ = [
    "DownloadError",
    "Failure",
    "download",
    "failure",
    "http_status",
    "new_client",
    "public_host",
    "shown_url",
]
