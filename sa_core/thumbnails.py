"""Thumbnails of image files in a thread's filesystem (``ThreadState.get_file_thumbnail``).

A thumbnail is a PNG at most ``THUMBNAIL_SIZE`` pixels on its longer side, made with Pillow (the
``images`` extra: ``pip install 'standard-agents[images]'``), imported only when a thumbnail is
first asked for. Thumbnails are cached in memory per file version: the cache key holds the
file's path, its write time and its size, so overwriting a file makes a new thumbnail while
reading the same version again costs nothing.
"""

from __future__ import annotations

import asyncio
import io
from collections import OrderedDict
from typing import TYPE_CHECKING

from sa_core.errors import ConfigurationError

if TYPE_CHECKING:
    from sa_core.state import ThreadState

THUMBNAIL_SIZE = 256
"""The longest side of a thumbnail, in pixels."""

_CACHE_ENTRIES = 512
_cache: OrderedDict[tuple[str, str, int, int, int], bytes | None] = OrderedDict()


def make_thumbnail(data: bytes, max_size: int = THUMBNAIL_SIZE) -> bytes | None:
    """Render ``data`` as a PNG thumbnail, or None when it is not an image Pillow can read.

    Args:
        data: The image file's bytes.
        max_size: The longest side of the result, in pixels.

    Returns:
        PNG bytes, or None for data that is not a (safe to decode) image.

    Raises:
        ConfigurationError: Pillow is not installed.

    """
    try:
        from PIL import Image, ImageOps, UnidentifiedImageError
    except ImportError:
        raise ConfigurationError(
            "Thumbnails need Pillow: pip install 'standard-agents[images]'."
        ) from None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.draft("RGB", (max_size, max_size))
            image: Image.Image = ImageOps.exif_transpose(opened) or opened
            if image.mode not in ("RGB", "RGBA", "L", "LA"):
                image = image.convert("RGBA" if "transparency" in image.info else "RGB")
            image.thumbnail((max_size, max_size))
            out = io.BytesIO()
            image.save(out, format="PNG", optimize=True)
            return out.getvalue()
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError):
        return None


async def file_thumbnail(
    state: ThreadState, path: str, max_size: int = THUMBNAIL_SIZE
) -> bytes | None:
    """The thumbnail of one of the thread's files (see :func:`make_thumbnail`).

    Args:
        state: The thread.
        path: The file's thread-absolute path.
        max_size: The longest side of the result, in pixels.

    Returns:
        PNG bytes, or None when the path is missing, a directory or not an image.

    """
    record = await state.stat_file(path)
    if record is None or record.is_directory:
        return None
    if not record.mime_type.startswith("image/"):
        return None
    key = (state.thread_id, record.path, record.created_at, record.size, max_size)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    data = await state.read_file(record.path)
    if data is None:
        return None
    thumbnail = await asyncio.to_thread(make_thumbnail, data, max_size)
    _cache[key] = thumbnail
    while len(_cache) > _CACHE_ENTRIES:
        _cache.popitem(last=False)
    return thumbnail
