"""Request bodies checked exactly as the schema says.

Litestar converts bodies leniently (``"silent": 0`` becomes ``False``, ``"3"`` becomes ``3``);
the OpenAPI schema promises a boolean or an integer. Routes whose bodies carry such fields decode
the raw body once more with msgspec's strict mode, so a client learns its mistake instead of
having it silently reinterpreted.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from litestar import Request

from sa_core.server.errors import ApiError

T = TypeVar("T")


async def strict_body(request: Request[Any, Any, Any], type_: type[T]) -> T:
    """Decode the request's JSON body as ``type_`` without lenient conversions.

    Args:
        request: the request (its body is already cached by Litestar's own decoding).
        type_: the msgspec struct the schema documents.

    Returns:
        The body as ``type_``.

    Raises:
        ApiError: 400 ``invalid_request`` naming the field, e.g. ``Expected `bool`, got `int`
            - at `$.silent```.
    """
    try:
        return msgspec.json.decode(await request.body(), type=type_, strict=True)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise ApiError(
            400, "invalid_request", f"The request body does not match the schema: {exc}."
        ) from None
