"""JSON errors: every failure is ``{"error": code, "detail": text}`` with a fitting status.

Bad input is always a 4xx. Only a bug (or a pack's endpoint raising) is a 500, logged with its
traceback and answered without internals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec

from sa_core.errors import (
    ConfigurationError,
    CutPointError,
    DefinitionNotFoundError,
    EndpointError,
    FileSystemError,
    MissingVariablesError,
    SAError,
    SharedHistoryError,
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadTerminatedError,
)
from sa_core.server.schemas import ErrorOut

logger = logging.getLogger("sa_core.server")

_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
    426: "upgrade_required",
}


UnmatchedRouteDetail = Callable[[Request[Any, Any, Any]], str | None]
"""Says what is wrong with a request no route matched (a 404), or None for the plain phrase."""


class ApiError(Exception):
    """An error answered as JSON: ``ApiError(404, "thread_not_found", "Thread x ...")``."""

    def __init__(self, status: int, error: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.extra = extra


def _body(error: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"error": error, "detail": detail, **{k: v for k, v in extra.items() if v is not None}}


def _respond(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Response[Any]:
    return Response(
        content=body, status_code=status, headers=headers, media_type="application/json"
    )


def api_error_handler(_: Request[Any, Any, Any], exc: ApiError) -> Response[Any]:
    """Answer an :class:`ApiError`."""
    return _respond(exc.status, _body(exc.error, exc.detail, **exc.extra))


def _body_problem(errors: list[dict[str, Any]]) -> str | None:
    """Say what is wrong with a body that is missing or not a JSON object, if that is it.

    Litestar reports a missing body as the bare message ``'data'`` and a non-object one as
    ``Expected `object`, got `array```, both keyed ``data``.
    """
    if len(errors) != 1 or errors[0].get("key") != "data" or errors[0].get("source") != "body":
        return None
    message = str(errors[0].get("message", ""))
    if message == "'data'":
        return (
            "The request body is empty; send a JSON object (Content-Type: application/json), "
            "as the schema at /schema/openapi.json describes."
        )
    prefix = "Expected `object`, got `"
    if message.startswith(prefix):
        got = message[len(prefix) :].rstrip("`")
        named = {
            "null": "null",
            "int": "an integer",
            "float": "a number",
            "str": "a string",
            "bool": "a boolean",
            "array": "an array",
        }.get(got, got)
        return (
            f"The request body must be a JSON object, not {named}; see the schema at "
            f"/schema/openapi.json."
        )
    return None


def _too_large_detail(request: Request[Any, Any, Any]) -> str:
    """Name the body size limit a 413 enforced, and how to raise it."""
    try:
        limit = request.route_handler.resolve_request_max_body_size()
    except Exception:  # no handler resolved (should not happen for a 413)
        limit = None
    size = "the limit" if not limit else f"the limit of {limit:,} bytes ({limit / 1e6:g} MB)"
    return (
        f"The request body is larger than {size}. Send less, or raise the limit with "
        f"Litestar's request_max_body_size when you build the app."
    )


def http_exception_handler(
    request: Request[Any, Any, Any],
    exc: HTTPException,
    unmatched: UnmatchedRouteDetail | None = None,
) -> Response[Any]:
    """Answer Litestar's own errors (validation, routing, auth) in the same shape.

    A path under ``/v1`` that no route serves is answered in OpenAI's shape instead, so the
    OpenAI clients show what went wrong.

    Args:
        request: the request that failed.
        exc: Litestar's error.
        unmatched: what to say about a path no route serves (the app that knows its packages
            passes :func:`sa_core.server.corners.unmatched_route_detail`); without it a 404
            says "Not Found".
    """
    status = exc.status_code
    if status in (404, 405):  # the /v1 routes answer their own errors; these are unrouted
        from sa_core.server.protocols.openai.unrouted import is_openai_path, unrouted_response

        if is_openai_path(request.url.path):
            return unrouted_response(request)
    code = _CODES.get(status, "error" if status < 500 else "internal_error")
    errors = None
    if isinstance(exc, ValidationException) and isinstance(exc.extra, list):
        errors = [e if isinstance(e, dict) else {"message": str(e)} for e in exc.extra]
    headers = dict(exc.headers or {})
    if status == 401:
        headers.setdefault("WWW-Authenticate", 'Bearer realm="standard-agents"')
    detail = exc.detail or HTTPStatus(status).phrase
    if status == 404 and detail == HTTPStatus.NOT_FOUND.phrase:
        detail = (unmatched(request) if unmatched is not None else None) or detail
    elif status == 413:
        detail = _too_large_detail(request)
    elif errors:
        body_problem = _body_problem(errors)
        if body_problem is not None:
            detail, errors = body_problem, None
    if status >= 500:
        logger.error("HTTP %s: %s", status, detail)
    return _respond(status, _body(code, detail, errors=errors), headers)


def sa_error_handler(_: Request[Any, Any, Any], exc: SAError) -> Response[Any]:
    """Map framework errors that reach a route to their status."""
    return api_error_handler(_, to_api_error(exc))


def to_api_error(exc: SAError) -> ApiError:
    """Map a framework error to an :class:`ApiError`."""
    if isinstance(exc, EndpointError):
        return ApiError(exc.status, exc.error, exc.detail)
    if isinstance(exc, MissingVariablesError):
        missing = [{"name": n, "declared_by": by} for n, by in exc.missing]
        return ApiError(422, "missing_variables", str(exc), missing=missing)
    if isinstance(exc, ThreadNotFoundError):
        return ApiError(404, "thread_not_found", str(exc))
    if isinstance(exc, ThreadTerminatedError):
        return ApiError(409, "thread_terminated", str(exc))
    if isinstance(exc, ThreadBusyError):
        return ApiError(409, "thread_busy", str(exc))
    if isinstance(exc, SharedHistoryError):
        return ApiError(409, "shared_history", str(exc))
    if isinstance(exc, CutPointError):
        return ApiError(422, "invalid_cut", str(exc))
    if isinstance(exc, DefinitionNotFoundError):
        return ApiError(404, "not_found", str(exc))
    if isinstance(exc, FileSystemError):
        return ApiError(400, "invalid_path", str(exc))
    if isinstance(exc, ConfigurationError):
        return ApiError(422, "unprocessable", str(exc))
    return ApiError(400, "invalid_request", str(exc))


def unicode_error_handler(_: Request[Any, Any, Any], exc: UnicodeDecodeError) -> Response[Any]:
    """Answer a body that is not valid UTF-8 (JSON must be UTF-8) with a 400."""
    byte = exc.object[exc.start : exc.start + 1].hex() if exc.object else "?"
    detail = (
        f"The request body is not valid UTF-8 (it holds the byte 0x{byte}); "
        f"send JSON encoded as UTF-8."
    )
    return _respond(400, _body("invalid_request", detail))


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Log an unexpected exception and answer a 500 without internals."""
    logger.exception("Unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _respond(
        500,
        _body("internal_error", "The server failed to handle the request; see the server log."),
    )


EXCEPTION_HANDLERS: dict[type[Exception] | int, Any] = {
    ApiError: api_error_handler,
    HTTPException: http_exception_handler,
    SAError: sa_error_handler,
    UnicodeDecodeError: unicode_error_handler,
    Exception: internal_error_handler,
}
"""Exception handlers for the app or a router."""


def exception_handlers(unmatched: UnmatchedRouteDetail) -> dict[type[Exception] | int, Any]:
    """:data:`EXCEPTION_HANDLERS` whose 404 for an unrouted path says what ``unmatched`` says."""

    def answer_http_exception(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
        return http_exception_handler(request, exc, unmatched)

    return {**EXCEPTION_HANDLERS, HTTPException: answer_http_exception}


_DESCRIPTIONS = {
    400: "Invalid request (bad parameters, body or path).",
    401: "Missing or unknown API key.",
    403: "The API key may not do this: a read-only key may not write, and managing keys needs "
    "a key with full access (every package, read-write).",
    404: "No such package, agent, thread or resource (or the thread is in another package, or "
    "the package is one the API key does not open).",
    409: "The thread is terminated, busy, or shares the history changed with a fork.",
    422: "The request is well-formed but cannot be carried out (missing variables, unknown agent).",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI error responses of a route: 400, 401, 403 and 404 always, plus ``statuses``.

    403 and 404 answer scoped keys anywhere (:func:`sa_core.server.auth.authorize`).
    """
    return {
        status: ResponseSpec(
            data_container=ErrorOut,
            description=_DESCRIPTIONS.get(status, HTTPStatus(status).phrase),
            generate_examples=False,
        )
        for status in sorted({400, 401, 403, 404, *statuses})
    }
