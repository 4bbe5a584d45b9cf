"""Errors of the OpenAI-compatible API, in OpenAI's shape.

Every failure under ``/v1`` answers ``{"error": {"message", "type", "param", "code"}}``, so the
official clients raise their usual exceptions (``openai.NotFoundError``,
``openai.BadRequestError``, ...) carrying our message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotAuthorizedException, ValidationException
from litestar.openapi.datastructures import ResponseSpec

logger = logging.getLogger("sa_core.server.protocols.openai")

_TYPES = {401: "invalid_request_error", 404: "invalid_request_error"}
T = TypeVar("T")


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


class Problems:
    """Every problem of one request body, answered together as one 400.

    Checks record what they find (:meth:`add`, :meth:`attempt`) and go on, so a client learns
    of every refused or invalid field at once; :meth:`raise_any` raises them (one error as it
    is, several joined: their messages in order, ``param`` listing each field).
    """

    def __init__(self) -> None:
        self.errors: list[OpenAIError] = []

    def add(self, error: OpenAIError) -> None:
        """Record a problem."""
        self.errors.append(error)

    def attempt(self, check: Callable[..., T], *args: Any, default: T) -> T:
        """``check(*args)``; ``default`` when it raises an :class:`OpenAIError` (recorded)."""
        try:
            return check(*args)
        except OpenAIError as exc:
            self.errors.append(exc)
            return default

    def raise_any(self) -> None:
        """Raise what was found, if anything."""
        errors = self.errors
        if not errors:
            return
        if len(errors) == 1:
            raise errors[0]
        params = ",".join(e.param for e in errors if e.param)
        codes = {e.code for e in errors}
        raise OpenAIError(
            400,
            f"The request has {len(errors)} problems: " + " ".join(e.message for e in errors),
            param=params or None,
            code=codes.pop() if len(codes) == 1 else "invalid_request",
        )


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
