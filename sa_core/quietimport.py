"""Importing without the cyclic garbage collector's passes: :class:`collector_paused`.

Importing the runtime or the database layer creates tens of thousands of long-lived objects
(modules, classes, functions, schemas). Each allocation counts towards the collector's next
pass, so the collector runs dozens of times while they load and walks them, again and again,
finding nothing to free: about a tenth of a first answer's time. The lazy imports of the
public API (:mod:`sa_core`) and of the store (``Runtime.start``) pause it meanwhile; it runs
again as usual afterwards.

Resuming alone would only postpone the work: the collector's next pass of its youngest
generation walks everything the block allocated (several milliseconds per import of the
runtime or the store), and passes of the middle generation walk it again. So the block hands
what it loaded straight to the oldest generation (:func:`promote_to_oldest`), which only the
collector's rare full passes walk, as they would walk these long-lived objects anyway.
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
            promote_to_oldest()
            gc.enable()


def promote_to_oldest() -> None:
    """Move every object the collector tracks to its oldest generation, without walking them.

    ``gc.freeze`` moves them to the permanent generation and ``gc.unfreeze`` moves that to the
    oldest one: two list splices. Nothing is lost: cyclic garbage among them is still found,
    by the next full collection. Skipped when the application froze objects itself (its
    frozen objects must stay frozen).
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
