"""HTTP for remote A2A agents: a client carrying an agent's headers, and failures classified.

The engine's remote-agent modules (``sa_core/engine/remote_*.py``) talk to other servers
through these helpers, so that neither ``httpx`` (about 130 modules) nor the a2a-sdk is
imported until a remote agent is first used: a runtime that calls none keeps its start-up
imports, and its heap, as they were. Nothing here knows about threads or the engine.
"""

from __future__ import annotations

from typing import Any, Literal

Failure = Literal["auth", "timeout", "network", "other"]


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


__all__ = ["Failure", "failure", "http_status", "new_client"]
