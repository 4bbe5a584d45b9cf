"""The effect scheduler: durable, delayed work on threads.

``state.schedule_effect(name, args, delay)`` stores a row; this scheduler sleeps until the
earliest one is due, claims due rows atomically, and runs each with a fresh ThreadState (no
execution). Rows claimed by a process that died are reset to pending on start, so an effect
still pending when the process stops runs when a runtime starts on the same database. With
several workers, each worker's reaper also gives back the effects of workers whose heartbeat
stopped, and wakes this loop at every round, so effects another worker scheduled or gave back
are found though nothing in this process scheduled them. Alone, the loop still reads the next
due time every :attr:`EffectScheduler.poll_seconds`, for effects another process stored.

The same loop starts due schedules (:mod:`sa_core.engine.workers.schedules`): it sleeps until the
earlier of the next due effect and the next due schedule.

Each run counts an attempt when its body starts (committed just before it, so a crash between
the claim and the body uses up nothing). An effect a restart interrupted runs again at most
once: its second run sees ``state.effect_attempt == 2``; one interrupted twice is marked
``failed`` with ``Interrupted by a restart before it finished.``
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from sa_core.engine.delivery.delivery import open_thread
from sa_core.engine.priority import background_context
from sa_core.spec.schemas import validate_args
from sa_core.store.clock import now_us
from sa_core.waits import event_set_within

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.store import EffectRun


MAX_EFFECT_ATTEMPTS = 2
"""Runs an effect may start: the first, and one more after a restart interrupted it."""


class EffectScheduler:
    """Runs scheduled effects when they are due."""

    poll_seconds: float = 5.0
    """Longest wait before the next due time is read again, so that effects another process
    stored (say a second runtime on the same SQLite file, which then stopped) run within it."""

    def __init__(self) -> None:
        self.kernel: Kernel | None = None
        self.running: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _bound(self) -> Kernel:
        if self.kernel is None:
            raise RuntimeError("effects run once the runtime has started")
        return self.kernel

    async def start(self, kernel: Kernel) -> None:
        """Reset interrupted runs and start the loop on ``kernel``."""
        self.kernel = kernel
        await kernel.store.reset_processing_effects(max_attempts=MAX_EFFECT_ATTEMPTS)
        self._task = asyncio.create_task(self._loop(), name="sa-effects")

    async def stop(self) -> None:
        """Stop the loop and cancel running effects (they run again on the next start)."""
        tasks = [t for t in (self._task, *self.running) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    async def schedule(self, thread_id: str, name: str, args: dict[str, Any], delay: float) -> str:
        """Store an effect due in ``delay`` seconds; returns its id."""
        effect = await self._bound().store.schedule_effect(
            thread_id, name, args, now_us() + int(max(delay, 0) * 1_000_000)
        )
        self.wake()
        return effect.id

    def wake(self) -> None:
        """Read the next due time again (effects other workers scheduled or gave back)."""
        self._wake.set()

    async def has_due(self) -> bool:
        """Whether a pending effect is due now."""
        next_time = await self._bound().store.next_effect_time()
        return next_time is not None and next_time <= now_us()

    async def _loop(self) -> None:
        kernel = self._bound()
        store, schedules = kernel.store, kernel.schedules
        while True:
            # clear before reading: an effect scheduled while the read is in flight (the read
            # can suspend on an async backend) must still wake the wait below
            self._wake.clear()
            next_time = await store.next_effect_time()
            effects_in = self.poll_seconds
            if next_time is not None:
                effects_in = max(0.0, (next_time - now_us()) / 1_000_000)
            schedules_in = await schedules.wait_seconds()  # due schedules share this loop
            timeout = min(
                self.poll_seconds,
                effects_in,
                self.poll_seconds if schedules_in is None else schedules_in,
            )
            if timeout > 0:
                await event_set_within(self._wake, timeout)
                continue
            if effects_in <= 0:
                for run in await store.claim_due_effects(now_us()):
                    task = asyncio.create_task(
                        self._run(run), name=f"sa-effect-{run.name}", context=background_context()
                    )
                    self.running.add(task)
                    task.add_done_callback(self.running.discard)
            if schedules_in is not None and schedules_in <= 0:
                await schedules.run_due()

    async def _run(self, run: EffectRun) -> None:
        kernel = self._bound()
        store = kernel.store
        try:
            thread = await open_thread(kernel, run.thread_id)
            if thread.row.terminated is not None:
                await store.finish_effect(run.id, "failed", "thread terminated")
                return
            effect = kernel.scope_of(thread).effect(run.name)
            value, problems = validate_args(effect.args, dict(run.args))
            if problems:
                raise ValueError(f"Effect '{run.name}' arguments invalid: " + "; ".join(problems))
            thread.effect_attempt = run.attempt
            thread.context["scheduled_effect"] = {
                "id": run.id,
                "name": run.name,
                "attempt": run.attempt,
            }
            if not await store.start_effect(run.id):
                return  # deleted with its thread since the claim: nothing to run
            result = effect.execute(kernel.user_state(thread), value)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not await store.finish_effect(run.id, "failed", f"{type(exc).__name__}: {exc}"):
                return  # deleted with its thread while it ran: nothing left to record on
            await kernel.log(
                run.thread_id,
                "effect_failed",
                {"effect": run.name, "id": run.id, "error": str(exc)},
            )
            return
        if await store.finish_effect(run.id, "completed"):
            await kernel.log(run.thread_id, "effect", {"effect": run.name, "id": run.id})
