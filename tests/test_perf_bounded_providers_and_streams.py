"""The offline providers keep bounded request memories; live stream frames are batched; sa serve
runs uvicorn with the httptools parser.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cache_kit import sqlite_store

from sa_core.providers import ProviderMessage, ProviderRequest
from sa_core.testing import DEFAULT_RECORDED, FunctionProvider, TestProvider

store = sqlite_store()


# -- the offline provider's memory ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_test_provider_keeps_only_the_latest_requests_but_counts_all():
    provider = TestProvider(max_recorded=3)
    for index in range(5):
        request = ProviderRequest(model="m", messages=[ProviderMessage("user", f"q{index}")])
        await provider.generate(request)
    assert provider.call_count == 5
    assert [provider.last_user_message(r) for r in provider.requests] == ["q2", "q3", "q4"]
    assert provider.last_user_message() == "q4"
    provider.reset()
    assert provider.call_count == 0 and provider.requests == []


def test_the_test_provider_is_bounded_by_default_and_rejects_a_zero_bound():
    assert TestProvider().max_recorded == DEFAULT_RECORDED
    assert TestProvider(max_recorded=None).max_recorded is None
    with pytest.raises(ValueError, match="max_recorded"):
        TestProvider(max_recorded=0)


@pytest.mark.asyncio
async def test_the_function_provider_keeps_only_the_latest_requests_by_default_too():
    provider = FunctionProvider(lambda request: "ok", max_recorded=2)
    for index in range(4):
        request = ProviderRequest(model="m", messages=[ProviderMessage("user", f"q{index}")])
        await provider.generate(request)
    assert provider.call_count == 4
    assert [provider.last_user_message(r) for r in provider.requests] == ["q2", "q3"]
    assert FunctionProvider(lambda request: "ok").max_recorded == DEFAULT_RECORDED


# -- live streams --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_frames_queued_together_are_sent_as_one_batch_in_order():
    from sa_core.server.streaming import _CLOSE, _PING, LiveStream

    queue: asyncio.Queue[Any] = asyncio.Queue()
    live = LiveStream("t1", queue)
    silent = {"type": "message_data", "data": {"id": "s", "silent": True}}
    for frame in ({"type": "a"}, silent, _PING, {"type": "b"}):
        queue.put_nowait(frame)
    batches = live.batches()
    try:
        assert await anext(batches) == [{"type": "connected", "thread_id": "t1"}]
        assert await anext(batches) == [{"type": "a"}, None, {"type": "b"}]
        queue.put_nowait({"type": "c"})
        queue.put_nowait(_CLOSE)
        queue.put_nowait({"type": "after close"})
        assert await anext(batches) == [{"type": "c"}]
        with pytest.raises(StopAsyncIteration):
            await anext(batches)
    finally:
        live.stop_heartbeat()


def test_sa_serve_runs_uvicorn_with_the_httptools_parser():
    from litestar import Litestar

    from sa_core.server.runner import build_server, http_protocol

    assert http_protocol() == "httptools"
    server = build_server(Litestar(route_handlers=[]), port=0, handle_signals=False)
    assert server.config.http == "httptools"
