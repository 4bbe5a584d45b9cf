"""A malformed provider stream fails the call cleanly.

Every async generator of the provider chain (the SSE reader, the event parser, the codec) is
closed in the task that used it, so none is left for the garbage collector to finalise in
another task, which printed "aclose(): asynchronous generator is already running" or
"generator didn't stop after athrow()" tracebacks after the turn had already failed. (httpx's
own nested generators are closed by closing the response.)
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sa_core.engine.model.retry import ModelAttempt, call_with_fallbacks
from sa_core.errors import ProviderError
from sa_core.providers import ProviderMessage, ProviderRequest
from sa_providers.anthropic import AnthropicProvider
from sa_providers.google import GoogleProvider
from sa_providers.openai import OpenAIProvider


class Malformed(BaseHTTPRequestHandler):
    """Streams one unreadable event, then holds the connection open until released."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        body = b"data: {not json\n\n"
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(body), body))
            self.wfile.flush()
            self.release.wait(10)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Malformed.release.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Malformed)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        Malformed.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.mark.asyncio
@pytest.mark.parametrize("provider_class", [OpenAIProvider, AnthropicProvider, GoogleProvider])
async def test_a_malformed_stream_fails_without_stray_generator_errors(
    server: str, provider_class: type[Any]
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    hooks = sys.get_asyncgen_hooks()
    left_open: list[str] = []

    def finalizer(agen: Any) -> None:  # called for generators nobody closed
        module = agen.ag_frame.f_globals.get("__name__", "") if agen.ag_frame else ""
        left_open.append(f"{module}:{agen.__qualname__}")
        assert hooks.finalizer is not None
        hooks.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    provider = provider_class(base_url=server)
    request = ProviderRequest(model="m", messages=[ProviderMessage("user", "hi")])
    request.env = lambda name: "key"

    async def no_wait(seconds: float) -> None:
        return None

    try:
        with pytest.raises(ProviderError) as caught:
            await call_with_fallbacks([ModelAttempt("m", provider, request)], sleep=no_wait)
        assert "unexpected response body: {not json" in str(caught.value)
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
    finally:
        await provider.aclose()
        loop.set_exception_handler(None)
        sys.set_asyncgen_hooks(*hooks)
    ours = [name for name in left_open if name.startswith(("sa_providers", "sa_core"))]
    assert ours == []
    assert [str(c.get("exception") or c.get("message")) for c in reported] == []
