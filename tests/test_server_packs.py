"""Packs, a scripted model and helpers shared by the server tests (imported as a module).

Pack ``alpha``: agent ``helper`` whose prompt offers a ``weather`` tool (it emits a custom event),
a blocking subagent ``summarizer`` and a non-blocking subagent ``researcher`` that needs the
scoped variable ``RESEARCH_KEY``; thread endpoints ``GET summary``, ``POST notes/{note_id}`` and
a public ``GET ping``. Pack ``beta`` has an agent of the same name, ``helper``.

The model (:func:`brain`) answers by model id and by what the last user message asks for.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sa_core import (
    Pack,
    define_agent,
    define_effect,
    define_model,
    define_prompt,
    define_thread_endpoint,
    define_tool,
)
from sa_core.providers import ProviderRequest
from sa_core.server import EndpointError, EndpointRequest, EndpointResponse
from sa_core.state import ThreadState
from sa_core.testing import FunctionProvider

PARENT_MODEL = define_model(name="parent", provider="test", model="parent-model")
CHILD_MODEL = define_model(name="child", provider="test", model="child-model")
REPLY = "Hello there, friend!"
REASONING = "The user greets me; greet back."


class City(BaseModel):
    city: str


class Summary(BaseModel):
    summary: str


def _weather(state: ThreadState, args: City) -> str:
    state.emit("weather_checked", {"city": args.city})
    return f"Sunny in {args.city}"


async def _summary(request: EndpointRequest, state: ThreadState) -> dict[str, Any]:
    page = await state.get_messages(limit=1)
    return {"thread_id": state.thread_id, "messages": page.total, "query": request.query}


async def _write_note(request: EndpointRequest, state: ThreadState) -> EndpointResponse:
    note = request.params["note_id"]
    if not note.isalnum():
        raise EndpointError(400, "invalid_note", "Note ids are letters and digits.")
    record = await state.write_file(f"/notes/{note}.txt", request.body, "text/plain")
    return EndpointResponse({"path": record.path, "size": record.size}, status=201)


def _ping(request: EndpointRequest, state: ThreadState) -> str:
    return "pong"


async def _remind(request: EndpointRequest, state: ThreadState) -> dict[str, str]:
    return {"effect_id": await state.schedule_effect("remind", {"note": "later"}, delay=3600)}


def alpha_pack() -> Pack:
    """The main test pack."""
    weather = define_tool(name="weather", description="Weather.", args=City, execute=_weather)
    finish = define_tool(
        name="finish", description="Report.", args=Summary, execute=lambda s, a: a.summary
    )
    main = define_prompt(
        name="main",
        model="parent",
        prompt="You help.",
        include_chat=True,
        tools=[
            "weather",
            {"name": "summarizer", "blocking": True, "init_user_message_property": "task"},
            {"name": "researcher", "blocking": False, "init_user_message_property": "task"},
        ],
        variables=[{"name": "ALPHA_TOKEN", "type": "secret", "required": False}],
    )
    child_a = define_prompt(name="child_a", model="child", prompt="Work.", tools=["finish"])
    child_b = define_prompt(name="child_b", model="child", prompt="Review.")
    research_a = define_prompt(
        name="research_a",
        model="child",
        prompt="Research.",
        tools=["finish"],
        variables=[{"name": "RESEARCH_KEY", "type": "secret", "required": True, "scoped": True}],
    )

    def child(name: str, prompt: str) -> Any:
        return define_agent(
            name=name,
            type="dual_ai",
            side_a={
                "prompt": prompt,
                "session_stop": {"name": "finish", "message_property": "summary"},
            },
            side_b={"prompt": "child_b"},
            max_session_turns=3,
            expose_as_tool=True,
            tool_description=f"The {name} subagent.",
        )

    helper = define_agent(name="helper", side_a={"prompt": "main"}, title="Helper")
    return Pack(
        name="alpha",
        agents=[helper, child("summarizer", "child_a"), child("researcher", "research_a")],
        entry_agents=["helper"],
        prompts=[main, child_a, child_b, research_a],
        models=[PARENT_MODEL, CHILD_MODEL],
        tools=[weather, finish],
        endpoints=[
            define_thread_endpoint(path="summary", handler=_summary, description="Counts."),
            define_thread_endpoint(path="notes/{note_id}", method="POST", handler=_write_note),
            define_thread_endpoint(path="ping", handler=_ping, public=True),
            define_thread_endpoint(path="remind", method="POST", handler=_remind),
        ],
        effects=[define_effect(name="remind", execute=lambda state, args: None)],
        version="1.2.0",
        author="Alpha Team",
        license="MIT",
    )


def beta_pack() -> Pack:
    """A second pack with an agent of the same name, needing the secret ``BETA_KEY``."""
    prompt = define_prompt(
        name="main",
        model="parent",
        prompt="Beta.",
        include_chat=True,
        variables=[{"name": "BETA_KEY", "type": "secret", "required": True}],
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"}, version="0.3.0")
    return Pack(name="beta", agents=[agent], prompts=[prompt], models=[PARENT_MODEL])


def _last_user(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content or ""
    return ""


def brain(request: ProviderRequest) -> Any:
    """The scripted model: tool calls by keyword, then a final answer after tool results."""
    if request.model == "child-model":
        if request.tools:
            return {"tool_calls": [{"name": "finish", "arguments": {"summary": "child result"}}]}
        return "ok"
    last = request.messages[-1]
    if last.role == "tool":
        return "Done."
    text = _last_user(request)
    if "weather" in text:
        return {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}
    if "summarize" in text:
        return {"tool_calls": [{"name": "summarizer", "arguments": {"task": "sum it up"}}]}
    if "research" in text:
        return {"tool_calls": [{"name": "researcher", "arguments": {"task": "dig"}}]}
    return {"content": REPLY, "reasoning": REASONING}


def provider(chunk_size: int | None = 4) -> FunctionProvider:
    """The scripted provider, streaming in small deltas."""
    return FunctionProvider(brain, chunk_size=chunk_size)


def test_packs_validate() -> None:
    alpha_pack().validate()
    beta_pack().validate(known_packs=[alpha_pack()])
