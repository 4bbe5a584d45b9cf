"""Errors of the OpenAI-compatible API, in OpenAI's shape.

Every failure under ``/v1`` answers ``{"error": {"message", "type", "param", "code"}}``, so the
official clients raise their usual exceptions (``openai.NotFoundError``,
``openai.BadRequestError``, ...) carrying our message.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotAuthorizedException, ValidationException
from litestar.openapi.datastructures import ResponseSpec

logger = logging.getLogger("sa_core.server.protocols.openai")

_TYPES = {401: "invalid_request_error", 404: "invalid_request_error"}


class OpenAIError(Exception):
    """An error answered in OpenAI's shape.

    Args:
        status: the HTTP status.
        message: what went wrong, naming the field.
        param: the request field at fault (``messages[2].content``), if any.
        code: a short machine-readable code (``model_not_found``), if any.
    """

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers: dict[str, str] = {}


def unsupported(param: str, detail: str = "") -> OpenAIError:
    """A 400 for a request field this server does not serve."""
    message = f"'{param}' is not supported by this server"
    return OpenAIError(
        400, f"{message}{': ' + detail if detail else '.'}", param=param, code="unsupported"
    )


def invalid(param: str, detail: str) -> OpenAIError:
    """A 400 for a field with a value of the wrong shape."""
    return OpenAIError(400, f"Invalid '{param}': {detail}", param=param, code="invalid_value")


def error_body(
    message: str, *, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The JSON body of an error (also the payload of a streamed error)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _answer(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Response[Any]:
    return Response(
        content=body, status_code=status, media_type="application/json", headers=headers
    )


def openai_error_handler(_: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Answer any exception raised under ``/v1`` in OpenAI's shape."""
    if isinstance(exc, OpenAIError):
        kind = "server_error" if exc.status >= 500 else "invalid_request_error"
        return _answer(
            exc.status,
            error_body(exc.message, kind=kind, param=exc.param, code=exc.code),
            exc.headers,
        )
    if isinstance(exc, NotAuthorizedException):
        return _answer(
            401,
            error_body(str(exc.detail), kind="invalid_request_error", code="invalid_api_key"),
        )
    if isinstance(exc, ValidationException):
        return _answer(400, error_body(str(exc.detail), kind="invalid_request_error"))
    if isinstance(exc, HTTPException):
        kind = "server_error" if exc.status_code >= 500 else "invalid_request_error"
        return _answer(exc.status_code, error_body(str(exc.detail), kind=kind))
    logger.exception("unhandled error under /v1", exc_info=exc)
    return _answer(500, error_body("Internal server error.", kind="server_error"))


EXCEPTION_HANDLERS: dict[type[Exception] | int, Any] = {Exception: openai_error_handler}


class ErrorDetail(msgspec.Struct):
    """What went wrong (OpenAI's error object)."""

    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(msgspec.Struct):
    """An error in OpenAI's shape."""

    error: ErrorDetail


def error_specs(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI error responses of a ``/v1`` route: 400 and 401 always, plus ``statuses``."""
    return {
        status: ResponseSpec(
            data_container=ErrorBody,
            description=HTTPStatus(status).phrase,
            generate_examples=False,
        )
        for status in sorted({400, 401, *statuses})
    }
