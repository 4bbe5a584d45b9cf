"""The event loop ``sa serve`` runs: requests and stream frames first, turns in time slices.

asyncio runs, in each pass of its loop, every callback that was ready when the pass began,
then polls the sockets again. On a busy server most of those callbacks are turns (a model
step, its commit, its tools: a millisecond or more each), so every pass takes as long as a
slice of every running turn, and a request needs several passes (read it, run its handler,
wake the stream that sends its frame). With 20 users in a closed loop a posted message
waited 30-60 ms for its first frame, almost all of it behind other threads' turns.

:class:`ResponsiveEventLoop` keeps background work (callbacks whose context has
:data:`~sa_core.engine.priority.BACKGROUND` set: turns, effects, the runtime's background
tasks) in a queue of its own, run by a slice callback that each pass schedules after its
socket events. While background work waits, the other callbacks (requests, streams) queue for
that slice too, and it runs them first: those queued when it starts, then the ones they queue
in turn, so a request read in a pass runs its handler and wakes its stream in that pass.
Then it runs background callbacks for :attr:`~ResponsiveEventLoop.slice_seconds`, and the
next pass polls the sockets again. Nothing starves: every pass runs a slice of each. With no
background work waiting the loop behaves as asyncio's.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVarTuple

from sa_core.engine.priority import BACKGROUND

_Ts = TypeVarTuple("_Ts")
_Queued = tuple[asyncio.Handle, contextvars.Context, Callable[..., Any], tuple[Any, ...]]


class ResponsiveEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop that runs background callbacks after the others, in slices."""

    slice_seconds: float = 0.0002
    """How long a pass runs background callbacks (the one running when it ends finishes).

    Shorter slices answer requests sooner and cost a poll of the sockets per slice. Measured
    with 20 users in a closed loop (before requests ran in the slice): 3 ms slices gave a
    28 ms first frame, 1 ms 12 ms, 0.1-0.3 ms 7-10 ms, at the same throughput.
    """

    foreground_seconds: float = 0.002
    """How long a slice goes on running the foreground callbacks queued while it runs.

    Long enough for a request's handler and the stream write it wakes (about 1 ms on a busy
    server), short enough that a task spinning on ``await asyncio.sleep(0)`` cannot keep the
    sockets from being polled.
    """

    def __init__(self) -> None:
        super().__init__()
        self._background: deque[_Queued] = deque()
        self._foreground: deque[_Queued] = deque()
        self._slice_scheduled = False

    def call_soon(
        self,
        callback: Callable[[*_Ts], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        """Schedule ``callback`` as asyncio does; background work joins the slice queue."""
        background = BACKGROUND.get() if context is None else context.get(BACKGROUND, False)
        if not background and not self._slice_scheduled:
            return super().call_soon(callback, *args, context=context)
        if self.is_closed():
            raise RuntimeError("Event loop is closed")
        if context is None:
            context = contextvars.copy_context()
        handle = asyncio.Handle(callback, args, self, context)
        if not background:  # runs in the slice, before the background callbacks
            self._foreground.append((handle, context, callback, args))
            return handle
        self._background.append((handle, context, callback, args))
        if not self._slice_scheduled:
            self._slice_scheduled = True
            self.call_at(self.time(), self._run_slice)
        return handle

    def _run_slice(self) -> None:
        """Run the foreground queue, then background callbacks for :attr:`slice_seconds`.

        Every foreground callback queued when the slice starts runs (as asyncio runs every
        callback ready when a pass starts); those they queue in turn run too, for up to
        :attr:`foreground_seconds`, so that a request's continuations (its task, then the
        stream it wakes) run in the pass that read it.
        """
        try:
            foreground = self._foreground
            self._drain(foreground, self.time() + self.foreground_seconds, len(foreground))
            self._drain(self._background, self.time() + self.slice_seconds, 1)
        finally:  # also when a callback raises SystemExit or KeyboardInterrupt
            if self._background or self._foreground:
                self.call_at(self.time(), self._run_slice)
            else:
                self._slice_scheduled = False

    def _drain(self, queue: deque[_Queued], deadline: float, at_least: int) -> None:
        """Run callbacks of ``queue``: ``at_least`` of them, then more until ``deadline``."""
        ran = 0
        while queue:
            handle, context, callback, args = queue.popleft()
            if not handle.cancelled():
                self._run_queued(handle, context, callback, args)
            ran += 1
            if ran >= at_least and self.time() >= deadline:
                break

    def _run_queued(
        self,
        handle: asyncio.Handle,
        context: contextvars.Context,
        callback: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        """Run one callback in its context; an error goes to the exception handler."""
        try:
            context.run(callback, *args)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self.call_exception_handler(
                {
                    "message": f"Exception in callback {callback!r}",
                    "exception": exc,
                    "handle": handle,
                }
            )
