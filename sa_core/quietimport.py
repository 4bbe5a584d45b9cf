"""Importing without the cyclic garbage collector's passes: :class:`collector_paused`.

Importing the runtime or the database layer creates tens of thousands of long-lived objects
(modules, classes, functions, schemas). Each allocation counts towards the collector's next
pass, so the collector runs dozens of times while they load and walks them, again and again,
finding nothing to free: about a tenth of a first answer's time. The lazy imports of the
public API (:mod:`sa_core`) and of the store (``Runtime.start``) pause it meanwhile; it runs
again as usual afterwards.
"""

from __future__ import annotations

import gc
from types import TracebackType


class collector_paused:  # noqa: N801 - used like a function: ``with collector_paused():``
    """Pause the cyclic garbage collector for a block (if it runs); resume it afterwards.

    Nested and concurrent uses are safe: only the block that paused it resumes it, and a
    collector the application switched off stays off.
    """

    __slots__ = ("_paused",)

    def __enter__(self) -> None:
        self._paused = gc.isenabled()
        if self._paused:
            gc.disable()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._paused:
            gc.enable()
