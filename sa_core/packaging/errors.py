"""The error raised by packing, unpacking, scaffolding and publishing (see sa_core.errors)."""

from __future__ import annotations

from sa_core.errors import PackagingError

__all__ = ["PackagingError"]
