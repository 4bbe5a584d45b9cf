"""A case from a stored thread: its user turns, its recorded answers, its trajectory.

``sa eval case from-thread THREAD_ID [--upto MESSAGE_ID]`` reads the thread up to a message
(its latest by default) and writes a case that replays it: ``input`` holds the user's turns,
``from_thread.answers`` the model's answers of the thread as stored (text and tool calls, in
order), and ``expect.tools`` the calls it made (``exact``), so a rerun of the case follows the
recorded path and scores its trajectory 1.0 until the agent (its tools, its prompts' tools)
changes. Add ``judge`` rubrics to say what went wrong in the incident; drop ``answers`` to run
the case against the live model instead.

Answers are replayed to the case's own thread only; child threads ask the model (live, or the
eval cache).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.evals.view import calls_of, skipped_tools, thread_messages

if TYPE_CHECKING:
    from sa_core.runtime import Runtime
    from sa_core.spec import Message


def _upto(messages: list[Message], upto: str | None) -> list[Message]:
    if upto is None:
        return messages
    for index, message in enumerate(messages):
        if message.id == upto:
            return messages[: index + 1]
    raise ValueError(f"message {upto!r} is not in the thread; pick one of its message ids")


async def case_from_thread(
    runtime: Runtime, thread_id: str, upto: str | None = None
) -> dict[str, Any]:
    """A suite document with one case replaying the thread (up to message ``upto``).

    Raises:
        ThreadNotFoundError: no such thread.
        ValueError: ``upto`` is not a message of the thread.
    """
    state = await runtime.get_thread(thread_id)
    messages = _upto(await thread_messages(state), upto)
    turns = [m.content or "" for m in messages if m.role == "user" and not m.silent]
    answers = [
        {
            "content": m.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls or []
            ],
        }
        for m in messages
        if m.role == "assistant" and (m.content or m.tool_calls) and m.status != "failed"
    ]
    skip = skipped_tools(runtime, state.package)
    calls = [
        {c.name: c.arguments} if c.arguments else c.name
        for c in calls_of(messages, skip, ("assistant",))
    ]
    case: dict[str, Any] = {
        "id": f"thread-{thread_id[-12:]}",
        "input": turns if len(turns) != 1 else turns[0],
        "from_thread": {
            "id": thread_id,
            "upto": upto or messages[-1].id if messages else None,
            "answers": answers,
        },
        "expect": {"tools": {"match": "exact", "calls": calls}},
    }
    return {
        "suite": f"from-thread-{thread_id[-12:]}",
        "target": f"{state.package}/{state.agent_id}",
        "cases": [case],
    }
