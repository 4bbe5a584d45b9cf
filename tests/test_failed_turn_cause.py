"""A failed turn names its real cause first: a rejected key is an authentication error, tried
once, not "All retry attempts exhausted"."""

from __future__ import annotations

import httpx
import pytest

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_providers.openai import OpenAIProvider


@pytest.mark.asyncio
async def test_a_rejected_key_fails_the_turn_with_the_auth_error_first(sa_runtime_factory):
    requests: list[httpx.Request] = []

    def reject(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        return httpx.Response(401, json=body)

    provider = OpenAIProvider(transport=httpx.MockTransport(reject))
    pack = Pack(
        name="demo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="Help.")],
        models=[define_model(name="fast", provider="openai", model="gpt-4o-mini")],
    )
    async with sa_runtime_factory(
        packs=[pack], providers={"openai": provider}, env={"OPENAI_API_KEY": "sk-wrong-key"}
    ) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("hi")
        logs = await thread.get_logs(order="asc")
    assert len(requests) == 1  # an authentication error is not retried
    (error,) = [log.data["error"] for log in logs if log.type == "step_error"]
    assert error.startswith("ProviderError: openai: HTTP 401 (auth_error): ")
    assert "Check the value of OPENAI_API_KEY." in error
    assert error.endswith("(model fast: 1 attempt; auth_error errors are not retried)")
    assert "exhausted" not in error and "sk-wrong-key" not in error
