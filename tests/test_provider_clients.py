"""A provider's shared HTTP clients: calls spread over a few small pools, one TLS set-up."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from sa_core.providers import HTTP_CLIENTS, BaseProvider


@pytest.mark.asyncio
async def test_calls_take_the_clients_in_turn_and_they_load_the_ca_bundle_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[Any] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    provider = BaseProvider(base_url="https://example.invalid")
    clients = [provider.client() for _ in range(HTTP_CLIENTS)]
    assert len({id(client) for client in clients}) == HTTP_CLIENTS
    assert provider.client() is clients[0]  # round and round, each created once
    assert len(loads) == 1
    await provider.aclose()
    assert all(client.is_closed for client in clients)
    assert provider.client() is not clients[0]  # a closed provider starts new clients
    await provider.aclose()
