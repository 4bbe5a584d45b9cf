"""What every HTTP provider does alike, checked on each: one suite, parametrised by provider.

The providers: ``openai`` (Chat Completions and Responses), ``anthropic``, ``google``, and the
OpenAI-compatible ``groq`` and ``openrouter``.

Each provider replays its recorded traffic and sends the recorded requests; maps HTTP errors,
transport failures, a missing key, an error object in the stream and a stream cut short to
:class:`~sa_core.errors.ProviderError` (never leaking the key); and registers itself under its
name and key variable. What only one wire format does stays in ``test_provider_<name>.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
from replay import (
    ERROR_CASES,
    TRANSPORT_CASES,
    Cassette,
    Replay,
    assert_same_requests,
    env_of,
    failing_transport,
    first_request,
    raising_transport,
    run_conversation,
    sse_transport,
)

from sa_core.errors import MissingKeyError, ProviderError
from sa_core.providers import ProviderMessage, ProviderRequest, StreamChunk, collect_stream
from sa_providers import anthropic, google, openai, openai_compatible

ALL_SCENARIOS = (
    "simple",
    "simple_streaming",
    "tool",
    "tool_streaming",
    "multi_tool",
    "multi_tool_streaming",
)


@dataclass(frozen=True)
class ProviderCase:
    """One provider as the suite drives it: how to build it, its key, its traffic, its wire.

    Attributes:
        name: The provider's registered name (the test id).
        make: Builds the provider on an ``httpx`` transport.
        model: A model name for synthetic requests.
        key_variable: The environment variable holding its key.
        key: A key value the error messages must never show.
        stream_error: Server-sent events carrying an error object.
        stream_error_chunk: The error chunk they become.
        cut_stream: Server-sent events that stop before the model finished.
    """

    name: str
    make: Callable[..., Any]
    model: str
    key_variable: str
    key: str
    stream_error: list[str]
    stream_error_chunk: StreamChunk
    cut_stream: list[str]

    def request(self, **overrides: Any) -> ProviderRequest:
        """A short request with the key set (``env=env_of()`` for none)."""
        messages = [ProviderMessage("system", "Be brief."), ProviderMessage("user", "Hi")]
        env = env_of(**{self.key_variable: self.key})
        base = ProviderRequest(model=self.model, messages=messages, env=env)
        for name, value in overrides.items():
            setattr(base, name, value)
        return base


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}"


ANTHROPIC_START = 'event: message_start\ndata: {"type": "message_start", "message": {"id": "m"}}'
CHAT_CUT = [_data({"choices": [{"delta": {"content": "Half an ans"}}]})]

CASES = [
    ProviderCase(
        name="openai",
        make=openai.OpenAIProvider,
        model="gpt-4o-mini",
        key_variable="OPENAI_API_KEY",
        key="sk-test-SECRET-0123456789",
        stream_error=['data: {"error": {"message": "upstream overloaded", "code": 503}}'],
        stream_error_chunk=StreamChunk(
            "error", error="openai: upstream overloaded", code="server_error"
        ),
        cut_stream=CHAT_CUT,
    ),
    ProviderCase(
        name="anthropic",
        make=anthropic.AnthropicProvider,
        model="claude-sonnet-4-20250514",
        key_variable="ANTHROPIC_API_KEY",
        key="sk-ant-SECRET-0123456789",
        stream_error=[
            ANTHROPIC_START,
            'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
            '"message": "Overloaded"}}',
        ],
        stream_error_chunk=StreamChunk("error", error="anthropic: Overloaded", code="server_error"),
        cut_stream=[
            ANTHROPIC_START,
            'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
            '"delta": {"type": "text_delta", "text": "Half"}}',
        ],
    ),
    ProviderCase(
        name="google",
        make=google.GoogleProvider,
        model="gemini-2.5-flash",
        key_variable="GOOGLE_API_KEY",
        key="AIza-SECRET-0123456789",
        stream_error=[
            'data: {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota"}}'
        ],
        stream_error_chunk=StreamChunk("error", error="google: quota", code="rate_limit"),
        cut_stream=[_data({"candidates": [{"content": {"parts": [{"text": "Ha"}]}}]})],
    ),
    ProviderCase(
        name="groq",
        make=openai_compatible.groq,
        model="moonshotai/kimi-k2-instruct",
        key_variable="GROQ_API_KEY",
        key="gsk-SECRET-0123456789",
        stream_error=['data: {"error": {"message": "upstream overloaded", "code": 503}}'],
        stream_error_chunk=StreamChunk(
            "error", error="groq: upstream overloaded", code="server_error"
        ),
        cut_stream=CHAT_CUT,
    ),
    ProviderCase(
        name="openrouter",
        make=openai_compatible.openrouter,
        model="google/gemini-2.5-flash",
        key_variable="OPENROUTER_API_KEY",
        key="sk-or-SECRET-0123456789",
        stream_error=['data: {"error": {"message": "upstream overloaded", "code": 503}}'],
        stream_error_chunk=StreamChunk(
            "error", error="openrouter: upstream overloaded", code="server_error"
        ),
        cut_stream=CHAT_CUT,
    ),
]
BY_NAME = {case.name: case for case in CASES}
each_provider = pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])


@dataclass(frozen=True)
class Traffic:
    """A recorded conversation: the provider, the cassette folder, how to build the request."""

    provider: str
    folder: str
    scenarios: tuple[str, ...] = ALL_SCENARIOS
    options: dict[str, Any] = field(default_factory=dict)


TRAFFIC = [
    Traffic("openai", "TestOpenAICommon/openai-gpt-4o-mini"),
    Traffic(
        "openai",
        "TestOpenAIResponsesCommon/openai-gpt-4o",
        ALL_SCENARIOS[:5],
        {"provider_options": {"api": "responses"}},
    ),
    Traffic(
        "anthropic", "TestAnthropicCommon/claude-sonnet-4", options={"parallel_tool_calls": True}
    ),
    Traffic("google", "TestGoogleCommon/gemini-2.5-flash"),
    Traffic(
        "groq",
        "TestOpenAICompatibleCommon/groq-kimi-k2",
        ("simple", "simple_streaming", "tool", "multi_tool", "multi_tool_streaming"),
        {"env": env_of(GROQ_API_KEY="gsk-1")},
    ),
    Traffic(
        "openrouter",
        "TestOpenRouterCommon/gemini",
        ("multi_tool", "multi_tool_streaming"),
        {"env": env_of(OPENROUTER_API_KEY="or-1")},
    ),
]
RECORDINGS = [(t, scenario) for t in TRAFFIC for scenario in t.scenarios]


# ---------------------------------------------------------------------------------------------
# Recorded traffic
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("traffic", "scenario"),
    RECORDINGS,
    ids=[f"{t.folder.split('/')[0]}-{scenario}" for t, scenario in RECORDINGS],
)
async def test_a_replayed_conversation_sends_the_recorded_requests_and_reads_the_answers(
    traffic: Traffic, scenario: str
) -> None:
    cassette = Cassette.load(f"{traffic.folder}/{scenario}.yaml")
    replay = Replay(cassette)
    provider = BY_NAME[traffic.provider].make(transport=replay.transport)
    request = first_request(cassette, **traffic.options)
    responses = await run_conversation(provider, request, stream=scenario.endswith("streaming"))
    assert replay.exhausted
    assert_same_requests(replay)
    assert responses[-1].content
    assert responses[-1].finish_reason == "stop"
    assert responses[-1].usage.prompt_tokens > 0
    if scenario.startswith(("tool", "multi_tool")):
        assert responses[0].finish_reason == "tool_calls"
        assert responses[0].tool_calls


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@each_provider
@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("status", "headers", "body", "code", "retry_after"), ERROR_CASES)
async def test_http_errors_map_to_provider_error_codes_without_the_key(
    case: ProviderCase,
    stream: bool,
    status: int,
    headers: dict[str, str],
    body: str,
    code: str,
    retry_after: float | None,
) -> None:
    provider = case.make(transport=failing_transport(status, body + case.key, headers))
    with pytest.raises(ProviderError) as caught:
        if stream:
            await collect_stream(provider.stream(case.request()))
        else:
            await provider.generate(case.request())
    error = caught.value
    assert (error.code, error.status, error.retry_after) == (code, status, retry_after)
    assert error.provider == case.name
    assert f"HTTP {status}" in str(error)
    if code == "auth_error":
        assert case.key_variable in str(error)
    assert case.key not in str(error)


@each_provider
@pytest.mark.asyncio
@pytest.mark.parametrize(("make_error", "code"), TRANSPORT_CASES)
async def test_transport_errors_never_escape(
    case: ProviderCase, make_error: Any, code: str
) -> None:
    provider = case.make(transport=raising_transport(make_error))
    with pytest.raises(ProviderError) as caught:
        await provider.generate(case.request())
    assert caught.value.code == code
    with pytest.raises(ProviderError) as caught:
        await collect_stream(provider.stream(case.request()))
    assert caught.value.code == code


@each_provider
@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_missing_key_names_the_variable(case: ProviderCase, stream: bool) -> None:
    provider = case.make(transport=failing_transport(500))
    with pytest.raises(MissingKeyError) as caught:
        if stream:
            await collect_stream(provider.stream(case.request(env=env_of())))
        else:
            await provider.generate(case.request(env=env_of()))
    assert caught.value.variable == case.key_variable
    assert case.key_variable in str(caught.value)


@each_provider
@pytest.mark.asyncio
async def test_an_error_object_in_the_stream_ends_it_with_an_error_chunk(
    case: ProviderCase,
) -> None:
    provider = case.make(transport=sse_transport(case.stream_error))
    chunks = [c async for c in provider.stream(case.request())]
    assert chunks[-1] == case.stream_error_chunk
    assert [c.type for c in chunks[:-1]] == []
    with pytest.raises(ProviderError) as caught:
        await collect_stream(provider.stream(case.request()))
    assert caught.value.code == case.stream_error_chunk.code


@each_provider
@pytest.mark.asyncio
async def test_a_stream_cut_before_the_model_finished_is_an_error(case: ProviderCase) -> None:
    provider = case.make(transport=sse_transport(case.cut_stream))
    chunks = [c async for c in provider.stream(case.request())]
    assert (chunks[-1].type, chunks[-1].code) == ("error", "server_error")
    assert "ended before the model finished" in (chunks[-1].error or "")
    with pytest.raises(ProviderError, match="ended before the model finished") as caught:
        await collect_stream(provider.stream(case.request()))
    assert caught.value.code == "server_error"


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------

REGISTERED = {
    openai: [("openai", "OPENAI_API_KEY")],
    anthropic: [("anthropic", "ANTHROPIC_API_KEY")],
    google: [("google", "GOOGLE_API_KEY")],
    openai_compatible: [
        ("openrouter", "OPENROUTER_API_KEY"),
        ("groq", "GROQ_API_KEY"),
        ("ollama", None),
        ("openai_compatible", "OPENAI_COMPATIBLE_API_KEY"),
    ],
}


@pytest.mark.parametrize("module", list(REGISTERED), ids=lambda m: m.__name__.split(".")[-1])
def test_each_plugin_registers_its_providers_with_their_key_variables(module: ModuleType) -> None:
    registered: list[Any] = []
    module.sa_register_providers(registered.append)
    assert [(p.name, p.key_variable) for p in registered] == REGISTERED[module]


def test_each_provider_of_the_suite_is_registered_under_its_name() -> None:
    names = {name for providers in REGISTERED.values() for name, _ in providers}
    assert {case.name for case in CASES} <= names
    registered: dict[str, Any] = {}
    for module in REGISTERED:
        module.sa_register_providers(
            lambda provider: registered.setdefault(provider.name, provider)
        )
    for case in CASES:
        built = case.make(transport=failing_transport(500))
        assert built.name == case.name
        assert type(registered[case.name]) is type(built)
