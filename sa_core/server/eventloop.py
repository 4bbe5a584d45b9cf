"""The event loop ``sa serve`` runs: requests and stream frames first, turns in time slices.

asyncio runs, in each pass of its loop, every callback that was ready when the pass began,
then polls the sockets again. On a busy server most of those callbacks are turns (a model
step, its commit, its tools: a millisecond or more each), so every pass takes as long as a
slice of every running turn, and a request needs several passes (read it, run its handler,
wake the stream that sends its frame). With 20 users in a closed loop a posted message
waited 30-60 ms for its first frame, almost all of it behind other threads' turns.

:class:`ResponsiveEventLoop` keeps background work (callbacks whose context has
:data:`~sa_core.engine.priority.BACKGROUND` set: turns, effects, the runtime's background
tasks) in a queue of its own. Each pass runs the ready callbacks of requests, streams and
timers as asyncio does, then background callbacks for at most :attr:`slice_seconds`; the
rest wait for the next pass, after the sockets have been polled again. Nothing starves:
every pass runs a slice. Turns get the CPU that requests leave, so a saturated server
answers a request, and streams a thread's frames, within a few passes of milliseconds.
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

    Shorter slices answer requests sooner and cost an extra poll of the sockets per slice:
    with 20 users in a closed loop, 3 ms slices gave a 28 ms first frame, 1 ms slices 12 ms
    and 0.1-0.3 ms slices 7-10 ms, at the same throughput; 0 (one callback a pass) no better.
    """

    def __init__(self) -> None:
        super().__init__()
        self._background: deque[_Queued] = deque()
        self._slice_scheduled = False

    def call_soon(
        self,
        callback: Callable[[*_Ts], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        """Schedule ``callback`` as asyncio does; background work joins the slice queue."""
        background = BACKGROUND.get() if context is None else context.get(BACKGROUND, False)
        if not background:
            return super().call_soon(callback, *args, context=context)
        if self.is_closed():
            raise RuntimeError("Event loop is closed")
        if context is None:
            context = contextvars.copy_context()
        handle = asyncio.Handle(callback, args, self, context)
        self._background.append((handle, context, callback, args))
        if not self._slice_scheduled:
            self._slice_scheduled = True
            super().call_soon(self._run_slice)
        return handle

    def _run_slice(self) -> None:
        """Run background callbacks for up to :attr:`slice_seconds`; the rest wait a pass."""
        queue = self._background
        deadline = self.time() + self.slice_seconds
        while queue:
            handle, context, callback, args = queue.popleft()
            if not handle.cancelled():
                self._run_background(handle, context, callback, args)
            if self.time() >= deadline:
                break
        if queue:
            super().call_soon(self._run_slice)
        else:
            self._slice_scheduled = False

    def _run_background(
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
