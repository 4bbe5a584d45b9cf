"""The model-call policy: retries with backoff, fallbacks, stream guards, attempt records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from sa_core.engine.model.retry import AttemptRecord, ModelAttempt, call_with_fallbacks
from sa_core.errors import ProviderError
from sa_core.providers import (
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    StreamChunk,
    Usage,
)

USAGE = Usage(prompt_tokens=1000, completion_tokens=500, total_tokens=1500, cached_tokens=400)
ANSWER = [
    StreamChunk("content-delta", delta="Hel"),
    StreamChunk("content-delta", delta="lo"),
    StreamChunk("content-done"),
    StreamChunk("finish", finish_reason="stop", usage=USAGE, response_id="r1"),
]


def fail(code: str, *, retry_after: float | None = None) -> ProviderError:
    return ProviderError(f"boom ({code})", code, 500, retry_after=retry_after)


@dataclass
class Hang:
    """Stream these chunks, then hang forever."""

    chunks: list[StreamChunk] = field(default_factory=list)


@dataclass
class Script:
    """A fake provider: each call plays the next step (chunks, an exception, or a hang)."""

    name: str
    steps: list[Any]
    calls: int = 0
    closed: int = 0

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        raise AssertionError("call_with_fallbacks must stream")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        step = self.steps[self.calls]
        self.calls += 1
        try:
            if isinstance(step, Exception):
                raise step
            if isinstance(step, Hang):
                for chunk in step.chunks:
                    yield chunk
                await asyncio.Event().wait()
            for chunk in step:
                if isinstance(chunk, Exception):
                    raise chunk
                yield chunk
        finally:
            self.closed += 1


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def attempt(provider: Script, name: str = "primary", **prices: float) -> ModelAttempt:
    request = ProviderRequest(model=f"{name}-wire", messages=[ProviderMessage("user", "hi")])
    return ModelAttempt(name, provider, request, **prices)


async def run(chain: list[ModelAttempt], **kwargs: Any) -> Any:
    records: list[AttemptRecord] = []
    chunks: list[StreamChunk] = []
    sleeps = Sleeps()
    result = await call_with_fallbacks(
        chain, on_chunk=chunks.append, on_attempt=records.append, sleep=sleeps, **kwargs
    )
    return result, records, chunks, sleeps


@pytest.mark.asyncio
async def test_a_successful_stream_is_forwarded_assembled_and_priced() -> None:
    provider = Script("p", [ANSWER])
    chain = [attempt(provider, input_price=2.0, output_price=10.0, cached_price=1.0)]
    (response, record), records, chunks, sleeps = await run(chain)
    assert response.content == "Hello"
    assert chunks == ANSWER
    assert records == [record]
    assert (record.model_name, record.provider, record.model) == ("primary", "p", "primary-wire")
    assert (record.attempt, record.retry_of, record.index, record.error) == (1, None, 0, None)
    # 600 uncached x 2 + 400 cached x 1 + 500 completion x 10, per million tokens
    assert record.cost == pytest.approx(0.0066)
    assert response.usage.cost == record.cost
    assert record.usage.prompt_tokens == 1000
    assert USAGE.cost is None  # the provider's usage object is not mutated
    assert record.finish_reason == "stop"
    assert record.time_to_first_token_ms is not None and record.latency_ms >= 0
    assert record.started_at > 1_600_000_000 * 1_000_000
    assert sleeps == []


@pytest.mark.asyncio
async def test_provider_reported_cost_is_kept_without_prices() -> None:
    usage = Usage(prompt_tokens=5, completion_tokens=1, cost=0.25)
    provider = Script(
        "p", [[StreamChunk("content-delta", delta="x"), StreamChunk("finish", usage=usage)]]
    )
    (_, record), *_ = await run([attempt(provider)])
    assert record.cost == 0.25


@pytest.mark.asyncio
@pytest.mark.parametrize("code", ["server_error", "rate_limit", "unknown"])
async def test_retryable_errors_are_retried_on_the_same_model_after_backoff(code: str) -> None:
    provider = Script("p", [fail(code), ANSWER])
    (response, record), records, _, sleeps = await run([attempt(provider)])
    assert response.content == "Hello"
    assert sleeps == [1.0]
    assert [(r.attempt, r.error_code, r.retry_of) for r in records] == [
        (1, code, None),
        (2, None, 0),
    ]
    assert records[0].error == f"boom ({code})"
    assert records[0].cost is None and records[0].finish_reason is None


@pytest.mark.asyncio
async def test_backoff_doubles_and_honours_a_longer_retry_after() -> None:
    steps = [
        fail("server_error"),
        fail("rate_limit", retry_after=30),
        fail("rate_limit", retry_after=0.5),
        ANSWER,
    ]
    _, _, _, sleeps = await run([attempt(Script("p", steps))], attempts_per_model=4)
    assert sleeps == [1.0, 30.0, 4.0]


@pytest.mark.asyncio
@pytest.mark.parametrize("code", ["auth_error", "invalid_request"])
async def test_non_retryable_errors_move_to_the_next_model(code: str) -> None:
    primary, fallback = Script("a", [fail(code)]), Script("b", [ANSWER])
    chain = [attempt(primary), attempt(fallback, "fallback")]
    (response, record), records, _, sleeps = await run(chain)
    assert response.content == "Hello"
    assert (primary.calls, fallback.calls, sleeps) == (1, 1, [])
    assert [(r.model_name, r.attempt, r.retry_of) for r in records] == [
        ("primary", 1, None),
        ("fallback", 1, 0),
    ]
    assert record.model == "fallback-wire"


@pytest.mark.asyncio
async def test_a_first_chunk_timeout_is_not_retried_on_the_same_model() -> None:
    primary, fallback = Script("a", [Hang(), ANSWER]), Script("b", [ANSWER])
    chain = [attempt(primary), attempt(fallback, "fallback")]
    (response, _), records, _, _ = await run(chain, first_chunk_timeout=0.01)
    assert response.content == "Hello"
    assert primary.calls == 1 and primary.closed == 1
    assert records[0].error_code == "timeout"
    assert "first chunk" in (records[0].error or "")


@pytest.mark.asyncio
async def test_a_stall_after_partial_output_times_out_and_resets_before_the_fallback() -> None:
    partial = Hang([StreamChunk("content-delta", delta="Hal")])
    primary, fallback = Script("a", [partial]), Script("b", [ANSWER])
    resets: list[str] = []

    async def reset() -> None:
        resets.append("reset")

    chain = [attempt(primary), attempt(fallback, "fallback")]
    (response, _), records, chunks, _ = await run(chain, stall_timeout=0.01, on_retry_reset=reset)
    assert resets == ["reset"]
    assert chunks[0].delta == "Hal" and response.content == "Hello"
    assert records[0].error_code == "timeout"
    assert records[0].time_to_first_token_ms is not None


@dataclass
class Trickle:
    """Stream ``count`` content deltas ``gap`` seconds apart, then finish."""

    count: int
    gap: float

    name: str = "trickle"

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        raise AssertionError("call_with_fallbacks must stream")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        for _ in range(self.count):
            await asyncio.sleep(self.gap)
            yield StreamChunk("content-delta", delta="x")
        yield StreamChunk("finish", finish_reason="stop")


@pytest.mark.asyncio
async def test_the_stall_limit_counts_from_the_last_chunk_not_from_the_first() -> None:
    # 12 chunks 0.02 s apart take longer than the 0.15 s stall limit, which never passes
    # between two chunks: the deadline moves with every chunk
    provider = Trickle(12, 0.02)
    (response, _), records, _, _ = await run([attempt(provider)], stall_timeout=0.15)  # type: ignore[arg-type]
    assert response.content == "x" * 12
    assert [r.error for r in records] == [None]


@pytest.mark.asyncio
async def test_a_stall_after_many_chunks_times_out() -> None:
    chunks = [StreamChunk("content-delta", delta=str(n)) for n in range(5)]
    primary, fallback = Script("a", [Hang(chunks)]), Script("b", [ANSWER])
    chain = [attempt(primary), attempt(fallback, "fallback")]
    (response, _), records, _, _ = await run(chain, stall_timeout=0.02)
    assert response.content == "Hello"
    assert records[0].error_code == "timeout"
    assert "no chunk" in (records[0].error or "") and "0.02s" in (records[0].error or "")


@pytest.mark.asyncio
async def test_a_short_stall_limit_applies_after_a_long_first_chunk_limit() -> None:
    # the first chunk may take 60 s, a later one only 0.02 s: the stall fires long before the
    # first-chunk deadline would have (the outer guard fails the test if it does not)
    partial = Hang([StreamChunk("content-delta", delta="Hal")])
    primary, fallback = Script("a", [partial]), Script("b", [ANSWER])
    chain = [attempt(primary), attempt(fallback, "fallback")]
    async with asyncio.timeout(40):
        (response, _), records, _, _ = await run(
            chain, first_chunk_timeout=60, stall_timeout=0.02
        )
    assert response.content == "Hello"
    assert records[0].error_code == "timeout" and "no chunk" in (records[0].error or "")


@pytest.mark.asyncio
async def test_a_cancelled_call_is_cancelled_not_timed_out() -> None:
    provider = Script("p", [Hang([StreamChunk("content-delta", delta="x")])])
    task = asyncio.create_task(run([attempt(provider)], stall_timeout=30))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.closed == 1


@pytest.mark.asyncio
async def test_no_reset_when_the_failed_attempt_streamed_nothing() -> None:
    resets: list[int] = []
    provider = Script("p", [fail("server_error"), ANSWER])
    await run([attempt(provider)], on_retry_reset=lambda: resets.append(1))
    assert resets == []


@pytest.mark.asyncio
async def test_stream_error_chunks_and_provider_bugs_are_retried() -> None:
    error_chunk = [
        StreamChunk("content-delta", delta="x"),
        StreamChunk("error", error="down", code="server_error"),
    ]
    provider = Script("p", [error_chunk, [RuntimeError("parser bug")], ANSWER])
    (response, _), records, chunks, _ = await run([attempt(provider)], attempts_per_model=3)
    assert response.content == "Hello"
    assert [r.error_code for r in records] == ["server_error", "unknown", None]
    assert "RuntimeError: parser bug" in (records[1].error or "")
    assert all(c.type != "error" for c in chunks)


@pytest.mark.asyncio
async def test_an_attempt_ended_by_an_error_chunk_closes_its_stream_and_its_deadline() -> None:
    # the stream's stall deadline must not outlive the attempt: a deadline left armed would
    # cancel the caller's task later, while it does something else
    error_chunk = [StreamChunk("error", error="down", code="invalid_request")]
    provider = Script("p", [error_chunk])
    with pytest.raises(ProviderError):
        await call_with_fallbacks([attempt(provider)], stall_timeout=0.02, first_chunk_timeout=0.02)
    assert provider.closed == 1
    await asyncio.sleep(0.1)  # well past both limits: still running, never cancelled
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0


@pytest.mark.asyncio
async def test_when_everything_fails_the_error_names_the_model_and_fallback_count() -> None:
    chain = [
        attempt(Script("a", [fail("server_error"), fail("server_error")])),
        attempt(Script("b", [fail("rate_limit"), fail("rate_limit")]), "second"),
        attempt(Script("c", [fail("auth_error")]), "third"),
    ]
    records: list[AttemptRecord] = []
    with pytest.raises(ProviderError) as caught:
        await call_with_fallbacks(chain, on_attempt=records.append, sleep=Sleeps())
    error = caught.value
    assert str(error).startswith(f"{error.__cause__} (")
    assert str(error).endswith(
        "(model primary and 2 fallbacks: 5 attempts; auth_error errors are not retried)"
    )
    assert error.code == "auth_error"
    assert isinstance(error.__cause__, ProviderError)
    assert [r.index for r in records] == [0, 1, 2, 3, 4]
    assert [r.retry_of for r in records] == [None, 0, 1, 2, 3]
    assert [r.attempt for r in records] == [1, 2, 1, 2, 1]


@pytest.mark.asyncio
async def test_async_callbacks_are_awaited() -> None:
    seen: list[str] = []

    async def on_chunk(chunk: StreamChunk) -> None:
        seen.append(chunk.type)

    async def on_attempt(record: AttemptRecord) -> None:
        seen.append(f"attempt {record.attempt}")

    await call_with_fallbacks([attempt(Script("p", [ANSWER]))], on_chunk=on_chunk, on_attempt=on_attempt)
    assert seen == ["content-delta", "content-delta", "content-done", "finish", "attempt 1"]


@pytest.mark.asyncio
async def test_an_on_chunk_failure_propagates_and_closes_the_stream() -> None:
    provider = Script("p", [ANSWER, ANSWER])

    def explode(chunk: StreamChunk) -> None:
        raise KeyError("caller bug")

    with pytest.raises(KeyError):
        await call_with_fallbacks([attempt(provider)], on_chunk=explode, sleep=Sleeps())
    assert (provider.calls, provider.closed) == (1, 1)


@pytest.mark.asyncio
async def test_cancellation_stops_at_once_without_walking_the_chain() -> None:
    primary, fallback = Script("a", [Hang()]), Script("b", [ANSWER])
    task = asyncio.create_task(call_with_fallbacks([attempt(primary), attempt(fallback, "fb")]))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (primary.calls, primary.closed, fallback.calls) == (1, 1, 0)


@pytest.mark.asyncio
async def test_an_empty_chain_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one model"):
        await call_with_fallbacks([])


@pytest.mark.asyncio
async def test_an_authentication_error_is_named_first_and_not_retried() -> None:
    denied = ProviderError("p: HTTP 401 (auth_error): bad key", "auth_error", 401, provider="p")
    provider = Script("p", [[denied], ANSWER])
    records: list[AttemptRecord] = []
    with pytest.raises(ProviderError) as caught:
        await call_with_fallbacks([attempt(provider)], on_attempt=records.append, sleep=Sleeps())
    message = str(caught.value)
    assert message == (
        "p: HTTP 401 (auth_error): bad key "
        "(model primary: 1 attempt; auth_error errors are not retried)"
    )
    assert "exhausted" not in message
    assert caught.value.code == "auth_error"
    assert len(records) == 1


def test_stream_timeouts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from sa_core.engine.model.modelcall import stream_timeouts

    monkeypatch.delenv("STANDARD_AGENTS_STREAM_FIRST_CHUNK_TIMEOUT_MS", raising=False)
    monkeypatch.delenv("STANDARD_AGENTS_STREAM_STALL_TIMEOUT_MS", raising=False)
    assert stream_timeouts() == (120.0, 45.0)
    monkeypatch.setenv("STANDARD_AGENTS_STREAM_FIRST_CHUNK_TIMEOUT_MS", "2500")
    monkeypatch.setenv("STANDARD_AGENTS_STREAM_STALL_TIMEOUT_MS", "500")
    assert stream_timeouts() == (2.5, 0.5)
