"""The request class of the API: a JSON body that is not UTF-8 is refused naming the byte.

JSON must be UTF-8. msgspec's own report of a body that is not ("Invalid UTF-8 encoded
string", in recent releases) names neither the byte nor what to do; when decoding fails, the
body is decoded once more as UTF-8 so the ``UnicodeDecodeError`` (which holds the byte) reaches
:func:`sa_core.server.errors.unicode_error_handler`. Only a failed decode pays for the check.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.exceptions import SerializationException

__all__ = ["ApiRequest"]


class ApiRequest(Request[Any, Any, Any]):
    """A Litestar request whose JSON body, when it is not UTF-8, raises ``UnicodeDecodeError``."""

    async def json(self) -> Any:
        """Decode the JSON body.

        Raises:
            UnicodeDecodeError: the body is not UTF-8 (it names the first bad byte).
            SerializationException: the body is UTF-8 but not JSON.

        """
        try:
            return await super().json()
        except SerializationException:
            (await self.body()).decode("utf-8")
            raise
