"""A multi-agent pack for the replay tests: files, a blocking and a non-blocking child, an approval.

The ``lead`` writes notes (a file and a value), delegates to a blocking ``researcher`` (whose
``lookup`` tool writes a cache file), starts a non-blocking ``writer``, waits for it, and
publishes (a tool that needs approval and writes a file). The model is a function of the
request (:func:`desk_model`), so a run is the same whatever the timing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider


class Notes(BaseModel):
    text: str


class Topic(BaseModel):
    topic: str


class Title(BaseModel):
    title: str


class Task(BaseModel):
    task: str


class Summary(BaseModel):
    summary: str


def desk_pack(
    executed: list[str],
    *,
    lead_prompt: str = "You run the research desk.",
    lookup_schema: type[BaseModel] = Topic,
    lookup_replay: str = "recorded",
    lookup_result: str = "Tides follow the moon.",
    notes_extra_child: bool = False,
) -> Pack:
    """The desk pack; every tool run appends its name to ``executed``.

    The keywords inject changes for the divergence tests: a prompt's words, the ``lookup``
    tool's schema, its replay mode and result, and an extra child started by ``write_notes``.
    """

    async def write_notes(state: Any, args: Notes) -> str:
        executed.append("write_notes")
        await state.write_file("/notes/plan.md", f"# Plan\n{args.text}\n")
        await state.set_value("notes", {"text": args.text})
        if notes_extra_child:
            await state.invoke_tool("writer", {"task": "an extra draft"})
        return "Notes saved."

    async def lookup(state: Any, args: Any) -> str:
        executed.append("lookup")
        topic = args.topic if hasattr(args, "topic") else args.subject
        await state.write_file(f"/cache/{topic}.txt", lookup_result)
        return lookup_result

    async def publish(state: Any, args: Title) -> str:
        executed.append("publish")
        await state.write_file(f"/out/{args.title}.md", "Tides follow the moon.")
        return f"Published {args.title}."

    def approve(state: Any, args: Summary) -> str:
        executed.append("approve")
        return "approved"

    tools = [
        define_tool(name="write_notes", description="Save notes.", args=Notes, execute=write_notes),
        define_tool(
            name="lookup",
            description="Look a topic up.",
            args=lookup_schema,
            execute=lookup,
            replay=lookup_replay,
        ),
        define_tool(
            name="publish",
            description="Publish.",
            args=Title,
            execute=publish,
            requires_approval=True,
        ),
        define_tool(name="approve", description="Approve.", args=Summary, execute=approve),
    ]
    prompts = [
        define_prompt(
            name="lead",
            model="lead",
            prompt=lead_prompt,
            include_chat=True,
            tools=[
                "write_notes",
                {"name": "researcher", "blocking": True, "initUserMessageProperty": "task"},
                {"name": "writer", "blocking": False, "initUserMessageProperty": "task"},
                "publish",
            ],
        ),
        define_prompt(
            name="research", model="res", prompt="Research.", include_chat=True, tools=["lookup"]
        ),
        define_prompt(name="draft", model="wri", prompt="Draft.", include_chat=True),
        define_prompt(
            name="review", model="rev", prompt="Review.", include_chat=True, tools=["approve"]
        ),
    ]
    review = {
        "prompt": "review",
        "stop_on_response": False,
        "session_stop": {"name": "approve", "message_property": "summary"},
    }
    agents = [
        define_agent(name="lead", side_a={"prompt": "lead"}),
        define_agent(
            name="researcher",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Researches a task.",
            max_session_turns=6,
            side_a={"prompt": "research", "stop_on_response": True},
            side_b=review,
        ),
        define_agent(
            name="writer",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Drafts a text.",
            max_session_turns=6,
            side_a={"prompt": "draft", "stop_on_response": True},
            side_b=review,
        ),
    ]
    models = [define_model(name=n, provider="test", model=n) for n in ("lead", "res", "wri", "rev")]
    return Pack(name="desk", agents=agents, prompts=prompts, models=models, tools=tools)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def desk_model() -> FunctionProvider:
    """The desk's models: each answer a function of the request it answers."""

    def answer(request: Any) -> Any:
        tools = [m.tool_name for m in request.messages if m.role == "tool"]
        texts = " ".join(m.content or "" for m in request.messages)
        if request.model == "lead":
            if "publish" in tools:
                return "Published the report."
            if "has returned the following result" in texts:
                return _call("publish", title="report")
            if "writer" in tools:
                return "Waiting for the writer."
            if "researcher" in tools:
                return _call("writer", task="draft the report")
            return {
                "tool_calls": [
                    {"name": "write_notes", "arguments": {"text": "study the tides"}},
                    {"name": "researcher", "arguments": {"task": "find facts on tides"}},
                ]
            }
        if request.model == "res":
            if "lookup" in tools:
                return "Found: tides follow the moon."
            return _call("lookup", topic="tides")
        if request.model == "wri":
            return "Draft: the moon moves the sea."
        return _call("approve", summary="Draft ok" if "Draft:" in texts else "Facts ok")

    return FunctionProvider(answer)


def no_model() -> FunctionProvider:
    """A provider that must not be called (a replay serves every answer)."""

    def answer(request: Any) -> Any:
        raise AssertionError(f"the provider was called for {request.model}")

    return FunctionProvider(answer)


async def run_desk(rt: Any) -> Any:
    """Run the desk's story on ``rt``: the message, the approval, the end. Returns the lead."""
    lead = await rt.create_thread("lead")
    await lead.send_message("Write a report on tides.")
    await rt.wait_idle(timeout=60)
    pending = await lead.pending_approvals()
    assert [p["name"] for p in pending] == ["publish"], pending
    await lead.approve(pending[0]["tool_call_id"])
    await rt.wait_idle(timeout=60)
    return lead
