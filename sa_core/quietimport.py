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
collector's rare full passes walk, as they would walk these long-lived objects anyway (a
long-running process's first full pass walks them once, later than it used to).

At exit, the interpreter's final collections walk and free every object that lives in a
reference cycle: every module's classes and functions, SQLAlchemy's and pydantic's included,
about a fifth of a short process's CPU (90 ms of a first answer). A process that started a
runtime skips them (:func:`skip_final_collection`): what is alive at exit is left to the
operating system, as ``os._exit`` would leave it, after every ``atexit`` handler ran.
"""

from __future__ import annotations

import atexit
import gc
import os
from types import TracebackType

KEEP_FINAL_COLLECTION = "SA_FINAL_COLLECTION"
"""Set this environment variable to ``1`` to keep the interpreter's final collections."""


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


class _FinalCollection:
    skipped = False


def skip_final_collection() -> None:
    """Let the process exit without the collector's final passes (registered once).

    An ``atexit`` handler freezes (``gc.freeze``) what is alive when the interpreter shuts
    down, so its final collections find nothing to walk. Modules are still cleared and every
    object that no reference cycle holds is still freed; objects held only by a cycle are left
    to the operating system without their ``__del__`` (which Python never promises to run at
    exit). Handlers registered before this one run after it, as usual. ``SA_FINAL_COLLECTION=1``
    keeps the final collections.
    """
    if _FinalCollection.skipped or os.environ.get(KEEP_FINAL_COLLECTION) == "1":
        return
    _FinalCollection.skipped = True
    atexit.register(gc.freeze)
