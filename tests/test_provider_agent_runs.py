"""A full agent run (ai_human with a tool loop) against each provider, over real HTTP.

Each provider is selected only through a model definition (`provider=`, `model=`,
`provider_options={"base_url": ...}`); its traffic goes to a replay server on 127.0.0.1 that
answers with the recorded responses of a real session, in order. The test checks the paths we
call, that the tool result the model receives is the one our tool produced, and the final answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from loopback import HTTPLoopback, send
from pydantic import BaseModel
from replay import Cassette

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool


@dataclass
class ReplayServer(HTTPLoopback):
    """Serves a cassette's responses in order on 127.0.0.1 and records what it was sent."""

    cassette: Cassette
    paths: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def reply(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        self.bodies.append(json.loads(body or b"{}"))
        self.paths.append(request.path)
        self.headers.append(dict(request.headers))
        index = len(self.paths) - 1
        if index >= len(self.cassette.interactions):
            request.send_response(500)
            request.end_headers()
            return
        interaction = self.cassette.interactions[index]
        send(request, interaction.status, interaction.content_type, interaction.body.encode())


class Location(BaseModel):
    location: str


class Numbers(BaseModel):
    a: int
    b: int


WEATHER = define_tool(name="weather", description="Get weather information for a location",
                      args=Location, execute=lambda state, args: "40 C")
ADD = define_tool(name="add", description="Add two numbers", args=Numbers, execute=lambda s, n: str(n.a + n.b))
MULTIPLY = define_tool(name="multiply", description="Multiply two numbers", args=Numbers,
                       execute=lambda s, n: str(n.a * n.b))


@dataclass(frozen=True)
class Case:
    cassette: str
    provider: str
    model: str
    key: str
    base_path: str
    options: dict[str, Any] = field(default_factory=dict)
    parallel: bool = False


CASES = {
    "openai-chat": Case("TestOpenAICommon/openai-gpt-4o-mini/tool_streaming.yaml", "openai", "gpt-4o-mini", "OPENAI_API_KEY", "/v1"),
    "openai-responses": Case("TestOpenAIResponsesCommon/openai-gpt-4o/tool_streaming.yaml", "openai", "gpt-4o", "OPENAI_API_KEY", "/v1", {"api": "responses"}),
    "anthropic": Case("TestAnthropicCommon/claude-sonnet-4/tool_streaming.yaml", "anthropic", "claude-sonnet-4-20250514", "ANTHROPIC_API_KEY", "/v1"),
    "google": Case("TestGoogleCommon/gemini-2.5-flash/tool_streaming.yaml", "google", "gemini-2.5-flash", "GOOGLE_API_KEY", "/v1beta"),
    "openai-compatible-groq": Case("TestOpenAICompatibleCommon/groq-kimi-k2/multi_tool_streaming.yaml", "groq", "moonshotai/kimi-k2-instruct-0905", "GROQ_API_KEY", "/openai/v1", parallel=True),
    "openrouter": Case("TestOpenRouterCommon/gemini/multi_tool_streaming.yaml", "openrouter", "google/gemini-2.5-flash", "OPENROUTER_API_KEY", "/api/v1", parallel=True),
}


def recorded_prompt(cassette: Cassette) -> tuple[str, str]:
    """The system prompt and user message of the recorded session."""
    body = cassette.interactions[0].recorded_request()
    text = json.dumps(body)
    system = "You are a helpful assistant. Always use both add and multiply at the same time." if "Always use both" in text else "You are a helpful assistant"
    user = "Add and multiply the number 2 and 3" if "Add and multiply" in text else "What's the weather in Florence,Italy?"
    return system, user


@pytest.fixture(params=sorted(CASES), ids=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Iterator[tuple[Case, Cassette]]:
    spec = CASES[request.param]
    yield spec, Cassette.load(spec.cassette)


@pytest.mark.asyncio
async def test_agent_with_a_tool_loop_runs_on_each_provider(case, tmp_path):
    spec, cassette = case
    system, user = recorded_prompt(cassette)
    tools = [ADD, MULTIPLY] if spec.parallel else [WEATHER]
    with ReplayServer(cassette) as server:
        model = define_model(
            name="main_model",
            provider=spec.provider,
            model=spec.model,
            provider_options={"base_url": server.url + spec.base_path, **spec.options},
        )
        prompt = define_prompt(name="main", model="main_model", prompt=system, include_chat=True, tools=[t.name for t in tools])
        pack = Pack(name="runs", agents=[define_agent(name="assistant", side_a={"prompt": "main"})],
                    prompts=[prompt], models=[model], tools=tools)
        async with Runtime(packs=[pack], database_url=f"sqlite:///{tmp_path}/run.db", load_entrypoints=True,
                           env={spec.key: "replay-key-123"}) as runtime:
            assert spec.provider in runtime.providers  # the built-in plugin, found through its entry point
            thread = await runtime.create_thread("assistant")
            await thread.send_message(user)
            page = await thread.get_messages()
            logs = [log for log in await thread.get_logs() if log.type == "llm_call"]

    assert [p.split("?")[0] for p in server.paths] == [i.path for i in cassette.interactions]
    roles = [m.role for m in page.messages]
    expected_tools = 2 if spec.parallel else 1
    assert roles == ["user", "assistant", *["tool"] * expected_tools, "assistant"], roles
    tool_rows = page.messages[2 : 2 + expected_tools]
    assert all(r.tool_status == "success" for r in tool_rows)
    assert sorted(r.content for r in tool_rows) == (["5", "6"] if spec.parallel else ["40 C"])
    answer = page.messages[-1].content or ""
    assert answer.strip()
    if not spec.parallel:
        assert "40" in answer
    # the second request carried our tool results back to the provider
    second = json.dumps(server.bodies[1])
    for row in tool_rows:
        assert json.dumps(row.content)[1:-1] in second
    # keys travel in headers only, never in logs or messages
    assert "replay-key-123" in json.dumps(server.headers[0]) + server.paths[0]
    assert "replay-key-123" not in json.dumps([m.model_dump() for m in page.messages] + [log.model_dump() for log in logs])
    assert len(logs) == 2 and all(log.data["error"] is None for log in logs)
    assert logs[0].data["input_tokens"] > 0
