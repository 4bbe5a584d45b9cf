"""Provider requests and stream reading shared by the test kit's tests."""

from __future__ import annotations

import re
from typing import Any

from sa_core.providers import (
    BaseProvider,
    ProviderMessage,
    ProviderRequest,
    ProviderToolCall,
    StreamChunk,
)
from sa_core.testing import (
    sa_database_url,  # noqa: F401  (the fixture, used without the plugin installed)
)

CALL_ID = re.compile(r"^call_[0-9a-f]{8}$")


def request(*user_texts: str, system: str = "You are helpful.", **extra: Any) -> ProviderRequest:
    messages = [ProviderMessage("system", system)]
    messages += [ProviderMessage("user", text) for text in user_texts]
    return ProviderRequest(model="test-model", messages=messages, **extra)


async def chunks_of(provider: BaseProvider, req: ProviderRequest) -> list[StreamChunk]:
    return [chunk async for chunk in provider.stream(req)]


def tool_round_trip() -> ProviderRequest:
    return ProviderRequest(
        "m",
        [
            ProviderMessage("system", "You are a weather bot."),
            ProviderMessage("user", "Weather in Oslo?"),
            ProviderMessage("assistant", None, [ProviderToolCall("c1", "weather", {})]),
            ProviderMessage("tool", "Sunny, 21C", tool_call_id="c1"),
        ],
    )
