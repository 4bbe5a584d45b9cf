"""The model-call policy: stream with guards, retry with backoff, then walk the fallback chain.

:func:`call_with_fallbacks` is how the engine talks to models (reference.md section 6.14). It always
streams, forwarding every chunk as it arrives, and assembles the answer. Per model it makes up
to ``attempts_per_model`` attempts, waiting ``base_delay * 2**(n - 1)`` seconds (or the
provider's ``retry_after`` when longer) between them; errors that a retry cannot fix
(``auth_error``, ``invalid_request``) and stream timeouts move straight on to the next model of
the chain. Every attempt, failed or not, is reported with its usage, cost and timings. A
cancelled call (a user stop) propagates at once and never walks the chain.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sa_core.errors import RETRYABLE_CODES, ProviderError
from sa_core.providers import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    StreamChunk,
    StreamCollector,
    Usage,
    compute_cost,
)

ChunkCallback = Callable[[StreamChunk], Awaitable[None] | None]
AttemptCallback = Callable[["AttemptRecord"], Awaitable[None] | None]
ResetCallback = Callable[[], Awaitable[None] | None]

_OUTPUT_CHUNKS = frozenset(
    {"content-delta", "reasoning-delta", "tool-call-start", "tool-call-delta", "tool-call-done"}
)


@dataclass(slots=True)
class ModelAttempt:
    """One model of the chain: the provider, the request to send, and prices for cost.

    Prices are USD per million tokens; ``None`` means unknown (cache reads and writes then
    cost the input price).
    """

    model_name: str
    provider: Provider
    request: ProviderRequest
    input_price: float | None = None
    output_price: float | None = None
    cached_price: float | None = None
    cache_write_price: float | None = None


@dataclass(slots=True)
class AttemptRecord:
    """What one attempt did, for the LLM log.

    Attributes:
        model_name: the model definition's name.
        provider: the provider's name.
        model: the model id sent on the wire.
        attempt: 1-based attempt number on this model.
        started_at: wall-clock start, microseconds since the epoch.
        latency_ms: duration of the attempt.
        time_to_first_token_ms: time to the first content, reasoning or tool chunk.
        usage: token usage (empty for failed attempts).
        cost: USD, from the model's prices, else as the provider reported it.
        finish_reason: the answer's finish reason; ``None`` for failed attempts.
        error: the error message of a failed attempt.
        error_code: its :class:`ProviderError` code.
        retry_of: index (in reporting order) of the attempt this one retries.
        index: this attempt's own index in reporting order.

    """

    model_name: str
    provider: str
    model: str
    attempt: int
    started_at: int
    latency_ms: int
    time_to_first_token_ms: int | None
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    error_code: str | None = None
    retry_of: int | None = None
    index: int = 0


async def _notify(callback: Callable[..., Awaitable[None] | None] | None, *args: Any) -> None:
    if callback is None:
        return
    result = callback(*args)
    if inspect.isawaitable(result):
        await result


def _limit(seconds: float) -> float | None:
    return seconds if seconds > 0 else None


class _CallbackFailed(Exception):
    """Carries an exception raised by ``on_chunk`` past the provider-error handling."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _Deadline:
    """A stream's silence limit: one timer, not moved per chunk, that re-arms itself.

    :meth:`start` marks activity and sets the limit (``None`` lifts it). The timer is armed at
    the earliest deadline any of the stream's limits (``shortest``) could set, so a shorter
    limit after the first chunk needs no new timer; when it fires and finds activity since (or
    a longer limit), it re-arms at the last activity plus the limit. So the task is cancelled
    exactly ``limit`` seconds after the last :meth:`start` (as ``asyncio.timeout`` moved per
    chunk would), while a chunk costs a clock read instead of a new timer handle. An expiry
    cancels the task; :meth:`expired` tells that cancellation apart from any other (the
    ``asyncio.timeout`` way, with ``uncancel``).
    """

    __slots__ = (
        "_loop",
        "_task",
        "_cancelling",
        "_shortest",
        "_limit",
        "_last",
        "_handle",
        "_when",
        "fired",
    )

    def __init__(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], shortest: float | None
    ) -> None:
        self._loop = loop
        self._shortest = shortest
        self._task = task
        self._cancelling = task.cancelling()
        self._limit: float | None = None
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._when = 0.0
        """When the armed timer (``_handle``) fires, in loop time."""
        self.fired = False
        """Whether the limit passed and cancelled the task, not yet consumed by :meth:`expired`
        (a caller checks it before calling :meth:`expired`, once per chunk)."""

    def start(self, limit: float | None) -> None:
        """Allow ``limit`` more seconds from now (``None``: no limit until the next start)."""
        self._limit = limit
        if limit is None:
            return  # an armed timer finds no limit when it fires and stops
        now = self._last = self._loop.time()
        due = now + limit
        handle = self._handle
        if handle is None or self._when > due:
            if handle is not None:
                handle.cancel()
            shortest = self._shortest
            early = due if shortest is None or shortest >= limit else now + shortest
            self._arm(early)

    def _arm(self, when: float) -> None:
        self._when = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        limit = self._limit
        if limit is None:
            return
        due = self._last + limit
        if self._loop.time() < due:  # activity since the timer was armed
            self._arm(due)
            return
        self.fired = True
        self._task.cancel()

    def expired(self) -> bool:
        """Whether the limit passed and cancelled the task (only that cancellation).

        Consumes the expiry: the task's cancellation request is withdrawn (``uncancel``), and
        ``True`` is returned when no other cancellation is pending.
        """
        if not self.fired:
            return False
        self.fired = False
        return self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        """Disarm the timer (the stream is done)."""
        self._limit = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


@dataclass(slots=True)
class _Guarded:
    """One attempt's stream, with first-chunk and stall timeouts and chunk forwarding."""

    entry: ModelAttempt
    on_chunk: ChunkCallback | None
    first_chunk_timeout: float
    stall_timeout: float
    started: float = field(default_factory=time.monotonic)
    first_output: float | None = None
    emitted: bool = False

    async def collect(self) -> ProviderResponse:
        """Stream the attempt, forwarding each chunk to ``on_chunk``, and assemble the answer.

        The chunks go straight from the provider's stream into a :class:`StreamCollector`
        (no generator of our own between them: one fewer suspension per chunk).

        Raises:
            ProviderError: an ``error`` chunk, or a timeout (code ``timeout``).
            _CallbackFailed: ``on_chunk`` raised.
        """
        # One deadline, restarted at every chunk (no task per chunk, unlike wait_for, and no
        # timer handle per chunk: see _Deadline). Only the provider's silence counts: the
        # deadline is lifted before an asynchronous ``on_chunk`` is awaited. Nothing else is
        # awaited between chunks, so the task can only be suspended (and the deadline fire)
        # inside the provider's ``anext``; a synchronous callback needs no lift.
        iterator = aiter(self.entry.provider.stream(self.entry.request))
        task = asyncio.current_task()
        assert task is not None, "a model stream runs in a task"
        limits = [limit for limit in (self.first_chunk_timeout, self.stall_timeout) if limit > 0]
        deadline = _Deadline(asyncio.get_running_loop(), task, min(limits, default=None))
        timeout, what = self.first_chunk_timeout, "first chunk"
        limit, stall_limit = _limit(timeout), _limit(self.stall_timeout)
        on_chunk = self.on_chunk
        collector = StreamCollector()
        try:
            while True:
                deadline.start(limit)
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    return collector.response()
                if deadline.fired and deadline.expired():  # the provider swallowed it
                    raise TimeoutError
                if chunk.type in _OUTPUT_CHUNKS:
                    self.emitted = True
                    if self.first_output is None:
                        self.first_output = time.monotonic()
                if chunk.type == "error":
                    deadline.start(None)  # the collector raises on it and stops
                elif on_chunk is not None:
                    try:
                        result = on_chunk(chunk)
                        if result is not None and inspect.isawaitable(result):
                            deadline.start(None)
                            await result
                    except Exception as exc:
                        raise _CallbackFailed(exc) from exc
                collector.add(chunk)
                limit, timeout, what = stall_limit, self.stall_timeout, "chunk"
        except (asyncio.CancelledError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError) or deadline.expired():
                raise ProviderError(
                    f"{self.entry.provider.name}: no {what} from model "
                    f"{self.entry.request.model} within {timeout:g}s",
                    "timeout",
                    provider=self.entry.provider.name,
                ) from None
            raise
        finally:
            deadline.close()
            deadline.expired()  # an expiry the provider turned into another error
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()

    def record(self, attempt: int, index: int, started_at: int) -> AttemptRecord:
        now = time.monotonic()
        first = self.first_output
        return AttemptRecord(
            model_name=self.entry.model_name,
            provider=self.entry.provider.name,
            model=self.entry.request.model,
            attempt=attempt,
            started_at=started_at,
            latency_ms=round((now - self.started) * 1000),
            time_to_first_token_ms=None if first is None else round((first - self.started) * 1000),
            retry_of=index - 1 if index else None,
            index=index,
        )


def _cost(entry: ModelAttempt, usage: Usage) -> float | None:
    cost = compute_cost(
        usage, entry.input_price, entry.output_price, entry.cached_price, entry.cache_write_price
    )
    return usage.cost if cost is None else cost


def _priced(usage: Usage, cost: float | None) -> Usage:
    """A copy of ``usage`` with ``cost`` (the provider's object is left as it is)."""
    if type(usage) is not Usage:
        return replace(usage, cost=cost)
    return Usage(
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.total_tokens,
        usage.reasoning_tokens,
        usage.cached_tokens,
        cost,
        usage.cache_write_tokens,
    )


def _gave_up(chain: Sequence[ModelAttempt], attempts: int, last: ProviderError) -> str:
    """How far the call got: ``model fast and 1 fallback: 3 attempts; ...``."""
    fallbacks = len(chain) - 1
    where = f"model {chain[0].model_name}"
    if fallbacks:
        where += f" and {fallbacks} fallback{'' if fallbacks == 1 else 's'}"
    text = f"{where}: {attempts} attempt{'' if attempts == 1 else 's'}"
    if last.code not in RETRYABLE_CODES:
        text += f"; {last.code} errors are not retried"
    return text


def _delay(attempt: int, base_delay: float, retry_after: float | None) -> float:
    return max(base_delay * 2.0 ** (attempt - 1), retry_after or 0.0)


async def call_with_fallbacks(
    chain: Sequence[ModelAttempt],
    *,
    on_chunk: ChunkCallback | None = None,
    on_attempt: AttemptCallback | None = None,
    on_retry_reset: ResetCallback | None = None,
    attempts_per_model: int = 2,
    base_delay: float = 1.0,
    first_chunk_timeout: float = 120.0,
    stall_timeout: float = 45.0,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> tuple[ProviderResponse, AttemptRecord]:
    """Call the first model of ``chain`` that answers, with retries and fallbacks.

    Args:
        chain: the model and then its fallbacks, in order.
        on_chunk: receives every streamed chunk (except ``error`` chunks) as it arrives.
        on_attempt: receives an :class:`AttemptRecord` after every attempt.
        on_retry_reset: called before a new attempt when a failed one had already streamed
            output, so that the caller can discard it.
        attempts_per_model: attempts per model before moving to the next one.
        base_delay: backoff base in seconds (doubles with every retry).
        first_chunk_timeout: seconds to wait for the first chunk (0 disables the guard).
        stall_timeout: seconds to wait between chunks (0 disables the guard).
        sleep: the backoff sleep (tests pass a fake).

    Returns:
        The assembled response and the successful attempt's record.

    Raises:
        ProviderError: every attempt failed. The message starts with the last error (the real
            cause, say an authentication error) and ends with how far the call got, e.g.
            ``(model fast and 1 fallback: 3 attempts; auth_error errors are not retried)``;
            ``code`` is the last error's and ``__cause__`` the last error itself.

    """
    if not chain:
        raise ValueError("call_with_fallbacks needs at least one model")
    if attempts_per_model < 1:
        raise ValueError("attempts_per_model must be at least 1")
    index = 0
    last_error: ProviderError | None = None
    dirty = False
    for entry in chain:
        for attempt in range(1, attempts_per_model + 1):
            if dirty:
                await _notify(on_retry_reset)
                dirty = False
            started_at = time.time_ns() // 1000
            guarded = _Guarded(entry, on_chunk, first_chunk_timeout, stall_timeout)
            try:
                response = await guarded.collect()
            except _CallbackFailed as failed:
                raise failed.error from None
            except ProviderError as exc:
                error = exc
            except Exception as exc:  # a provider bug must not stop the chain
                error = ProviderError(
                    f"{entry.provider.name}: {type(exc).__name__}: {exc}",
                    "unknown",
                    provider=entry.provider.name,
                )
            else:
                record = guarded.record(attempt, index, started_at)
                response.usage = _priced(response.usage, _cost(entry, response.usage))
                record.usage, record.cost = response.usage, response.usage.cost
                record.finish_reason = response.finish_reason
                await _notify(on_attempt, record)
                return response, record
            record = guarded.record(attempt, index, started_at)
            record.error, record.error_code = str(error), error.code
            await _notify(on_attempt, record)
            index += 1
            last_error, dirty = error, dirty or guarded.emitted
            same_model = error.code in RETRYABLE_CODES and error.code != "timeout"
            if not same_model or attempt == attempts_per_model:
                break
            await sleep(_delay(attempt, base_delay, error.retry_after))
    assert last_error is not None
    raise _exhausted(chain, index, last_error) from last_error


def _exhausted(chain: Sequence[ModelAttempt], attempts: int, last: ProviderError) -> ProviderError:
    """The error of a call whose every attempt failed: the last error, and how far it got."""
    return ProviderError(
        f"{last} ({_gave_up(chain, attempts, last)})",
        last.code,
        last.status,
        provider=last.provider,
    )


__all__ = ["AttemptRecord", "ModelAttempt", "call_with_fallbacks"]
