"""The error raised by packing, unpacking, scaffolding and publishing."""

from __future__ import annotations

from sa_core.errors import SAError

__all__ = ["PackagingError"]


class PackagingError(SAError):
    """Packing, unpacking, building or publishing a pack failed; the message says what to do."""
