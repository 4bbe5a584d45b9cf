"""``GET .../files/{path}?thumbnail=1``: a small PNG of an image file."""

from __future__ import annotations

from litestar import Response

from sa_core.errors import ConfigurationError
from sa_core.server.errors import ApiError
from sa_core.state import ThreadState


async def thumbnail_response(thread: ThreadState, path: str) -> Response[bytes]:
    """Answer the thumbnail of ``path`` (404 ``no_thumbnail`` when it is not an image)."""
    try:
        data = await thread.get_file_thumbnail(path)
    except ConfigurationError as exc:
        raise ApiError(501, "thumbnails_unavailable", str(exc)) from None
    if data is None:
        raise ApiError(
            404, "no_thumbnail", f"{path} is not an image, so it has no thumbnail; download it."
        )
    return Response(
        content=data,
        media_type="image/png",
        headers={"Cache-Control": "private, max-age=60"},
    )
