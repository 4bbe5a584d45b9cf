"""AG-UI (``POST /ag-ui/{package}/{agent}``) against a live ``sa serve``.

The server hosts the ``agui_kit`` test plugin (``tests/agui_kit``): its model streams in chunks
and follows ``/tool NAME {json}`` commands; the agent ``planner`` has tools that set a thread
value, read one, emit an event and (with a human's approval) transfer money. The client
(``tests/agui_client.py``) posts ``RunAgentInput``s built with ``ag_ui.core``, validates every
event with the package's types and their order, and keeps the conversation and state from the
events, as ``@ag-ui/client`` does, so each next run sends what a real frontend would.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import EventType
from agui_client import Client, arguments
from openai_serve import Served

from sa_core.store import open_store

KIT = Path(__file__).parent / "agui_kit"
PLANNER = "/ag-ui/agui_kit/planner"
THREADS = "/api/packages/agui_kit/threads"
CONFIRM = {
    "name": "confirm",
    "description": "Ask the user to confirm.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
}
SAVE_PLAN = '/tool save_plan {"steps": ["draft", "review"]}'


def kit_server(tmp: Path, database: str, *extra: str, key: str = "") -> Served:
    return Served(tmp, database, *extra, key=key, test_provider=False, pythonpath=[KIT]).start()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = kit_server(tmp_path, f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        yield server
    finally:
        server.stop()


def client(server: Served, **kwargs: Any) -> Client:
    return Client(f"{server.url}{PLANNER}", server.key, **kwargs)


def api(server: Served, path: str) -> Any:
    headers = {"Authorization": f"Bearer {server.key}"}
    response = httpx.get(f"{server.url}{path}", headers=headers, params={"limit": 100})
    assert response.status_code == 200, response.text
    return response.json()


def stored(server: Served, thread_id: str) -> list[tuple[str, str | None]]:
    messages = api(server, f"{THREADS}/{thread_id}/messages")["messages"]
    return [(m["role"], m["content"]) for m in messages]


def test_a_turn_with_a_tool_call_and_a_state_change_streams_every_event_valid(
    served: Served,
) -> None:
    chat = client(served, state={"theme": "dark"})
    chat.say(SAVE_PLAN)
    run = chat.run()
    assert run.status == 200 and run.headers["content-type"].startswith("text/event-stream")
    thread_id = run.headers["x-sa-thread-id"]
    text = ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    shape = [k for i, k in enumerate(run.kinds) if k != "TEXT_MESSAGE_CONTENT" or
             run.kinds[i - 1] != "TEXT_MESSAGE_CONTENT"]  # fmt: skip
    assert shape == [
        "RUN_STARTED", "STATE_SNAPSHOT", *text,
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
        "STATE_DELTA", "TOOL_CALL_RESULT", *text, "RUN_FINISHED",
    ]  # fmt: skip
    assert run.kinds.count("TEXT_MESSAGE_CONTENT") > 4  # streamed in deltas, not whole
    started, finished = run.of(EventType.RUN_STARTED)[0], run.of(EventType.RUN_FINISHED)[0]
    assert (started["thread_id"], finished["thread_id"]) == (chat.thread_id, chat.thread_id)
    assert started["run_id"] == finished["run_id"] and finished.get("outcome") is None
    assert run.of(EventType.STATE_SNAPSHOT)[0]["snapshot"] == {"theme": "dark"}
    delta = run.of(EventType.STATE_DELTA)[0]["delta"]
    assert delta == [{"op": "add", "path": "/plan", "value": {"steps": ["draft", "review"]}}]
    call = run.of(EventType.TOOL_CALL_START)[0]
    assert call["tool_call_name"] == "save_plan"
    assert arguments(run, call["tool_call_id"]) == {"steps": ["draft", "review"]}
    result = run.of(EventType.TOOL_CALL_RESULT)[0]
    assert (result["tool_call_id"], result["content"]) == (call["tool_call_id"], "Saved 2 steps")
    assert run.text == "Calling save_plan.save_plan returned: Saved 2 steps"
    # the ids streamed are the stored messages'; the client's state is the thread's values
    messages = api(served, f"{THREADS}/{thread_id}/messages")["messages"]
    first, row, answer = messages[1], messages[2], messages[3]
    assert call["parent_message_id"] == first["id"] == run.of(EventType.TEXT_MESSAGE_START)[0][
        "message_id"]  # fmt: skip
    assert result["message_id"] == row["id"]
    assert run.of(EventType.TEXT_MESSAGE_END)[-1]["message_id"] == answer["id"]
    assert stored(served, thread_id) == [
        ("user", SAVE_PLAN), ("assistant", "Calling save_plan."), ("tool", "Saved 2 steps"),
        ("assistant", "save_plan returned: Saved 2 steps"),
    ]  # fmt: skip
    assert chat.state == {"theme": "dark", "plan": {"steps": ["draft", "review"]}}
    assert api(served, f"{THREADS}/{thread_id}")["tags"] == ["ag-ui"]


def test_a_run_continues_the_same_thread_with_the_conversation_the_client_kept(
    served: Served,
) -> None:
    chat = client(served, state={"theme": "dark"})
    chat.say(SAVE_PLAN)
    first = chat.run()
    thread_id = first.headers["x-sa-thread-id"]
    chat.state["theme"] = "light"  # the frontend changes its state
    chat.say('/tool read_value {"key": "theme"}')
    second = chat.run()
    assert second.headers["x-sa-thread-id"] == thread_id
    assert second.of(EventType.RUN_STARTED)[0]["thread_id"] == chat.thread_id
    assert second.of(EventType.STATE_SNAPSHOT)[0]["snapshot"] == {
        "theme": "light", "plan": {"steps": ["draft", "review"]}
    }  # fmt: skip
    assert second.of(EventType.TOOL_CALL_RESULT)[0]["content"] == '"light"'  # the tool saw it
    assert second.kinds[-1] == "RUN_FINISHED"
    chat.say("thanks")
    third = chat.run()
    assert third.text == "You said: thanks"
    # the history the client sends again is not stored again: one message per thing said
    assert stored(served, thread_id) == [
        ("user", SAVE_PLAN), ("assistant", "Calling save_plan."), ("tool", "Saved 2 steps"),
        ("assistant", "save_plan returned: Saved 2 steps"),
        ("user", '/tool read_value {"key": "theme"}'), ("assistant", "Calling read_value."),
        ("tool", '"light"'), ("assistant", 'read_value returned: "light"'),
        ("user", "thanks"), ("assistant", "You said: thanks"),
    ]  # fmt: skip
    assert api(served, f"{THREADS}?tag=ag-ui")["total"] == 1


def test_a_frontend_tool_call_ends_the_run_and_its_result_continues_the_turn(
    tmp_path: Path,
) -> None:
    database = f"sqlite:///{tmp_path / 'sa.db'}"
    server = kit_server(tmp_path, database)
    try:
        chat = client(server, tools=[CONFIRM])
        chat.say('/tool confirm {"question": "Ship it?"}')
        paused = chat.run()
        thread_id = paused.headers["x-sa-thread-id"]
        assert paused.kinds[-4:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
                                     "RUN_FINISHED"]  # fmt: skip
        assert "TOOL_CALL_RESULT" not in paused.kinds
        call = paused.of(EventType.TOOL_CALL_START)[0]
        assert call["tool_call_name"] == "confirm"
        assert arguments(paused, call["tool_call_id"]) == {"question": "Ship it?"}
        outcome = paused.of(EventType.RUN_FINISHED)[0]["outcome"]
        assert outcome == {"type": "success", "pending_tool_call_ids": [call["tool_call_id"]]}
        assert api(server, f"{THREADS}/{thread_id}")["status"] == "awaiting_client_tools"
    finally:
        server.stop()
    server = kit_server(tmp_path, database, key=server.key)  # the pause is durable
    try:
        chat.url = f"{server.url}{PLANNER}"
        chat.answer_tool(call["tool_call_id"], "yes")
        done = chat.run()
        assert done.headers["x-sa-thread-id"] == thread_id
        assert done.text == "confirm returned: yes"
        assert "TOOL_CALL_RESULT" not in done.kinds  # the client has its result already
        assert done.of(EventType.RUN_FINISHED)[0].get("outcome") is None
        messages = api(server, f"{THREADS}/{thread_id}/messages")["messages"]
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", '/tool confirm {"question": "Ship it?"}'), ("assistant", "Calling confirm."),
            ("tool", "yes"), ("assistant", "confirm returned: yes"),
        ]  # fmt: skip
        assert messages[2]["tool_call_id"] == call["tool_call_id"]
        assert messages[2]["metadata"]["client_tool"] is True
    finally:
        server.stop()


@pytest.fixture
def workers(tmp_path: Path, pg_database_url: str) -> Iterator[list[Served]]:
    async def key() -> str:
        async with await open_store(pg_database_url) as store:
            return (await store.create_api_key("ag-ui-tests"))[0]

    token = asyncio.run(key())
    started: list[Served] = []
    try:
        for _ in range(2):
            started.append(kit_server(tmp_path, pg_database_url, "--lease-seconds", "2", key=token))
        yield started
    finally:
        for worker in started:
            worker.stop()


def test_a_conversation_goes_on_through_any_worker(workers: list[Served]) -> None:
    one, two = workers
    chat = client(one, tools=[CONFIRM], state={"theme": "dark"})
    chat.say(SAVE_PLAN)
    thread_id = chat.run().headers["x-sa-thread-id"]
    chat.url = f"{two.url}{PLANNER}"  # the threadId finds the thread in the database
    chat.say('/tool save_plan {"steps": ["ship"]}')
    again = chat.run()
    assert again.headers["x-sa-thread-id"] == thread_id
    assert again.of(EventType.TOOL_CALL_RESULT)[0]["content"] == "Saved 1 steps"
    chat.say('/tool confirm {"question": "Ship it?"}')
    call_id = chat.run().of(EventType.TOOL_CALL_START)[0]["tool_call_id"]
    chat.url = f"{one.url}{PLANNER}"  # the result reaches the turn paused through the other
    chat.answer_tool(call_id, "yes")
    done = chat.run()
    assert (done.headers["x-sa-thread-id"], done.text) == (thread_id, "confirm returned: yes")
    assert chat.state == {"theme": "dark", "plan": {"steps": ["ship"]}}
    assert len(stored(one, thread_id)) == 12  # three turns of four messages, none twice


def test_a_new_message_while_a_frontend_tool_awaits_its_result_is_a_run_error(
    served: Served,
) -> None:
    chat = client(served, tools=[CONFIRM])
    chat.say('/tool confirm {"question": "Ship it?"}')
    call_id = chat.run().of(EventType.TOOL_CALL_START)[0]["tool_call_id"]
    chat.say("never mind")
    refused = chat.run()
    assert refused.kinds == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
    error = refused.of(EventType.RUN_ERROR)[0]
    assert error["code"] == "tool_results_awaited" and call_id in error["message"]


def test_a_tool_call_awaiting_approval_is_an_interrupt_and_resume_decides_it(
    served: Served,
) -> None:
    chat = client(served)
    chat.say('/tool transfer {"amount": 5}')
    paused = chat.run()
    call_id = paused.of(EventType.TOOL_CALL_START)[0]["tool_call_id"]
    outcome = paused.of(EventType.RUN_FINISHED)[0]["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    assert (interrupt["id"], interrupt["tool_call_id"], interrupt["reason"]) == (
        call_id, call_id, "tool_approval",
    )  # fmt: skip
    assert "approvals/" + call_id in interrupt["message"]
    resumed = chat.run(resume=[{"interrupt_id": call_id, "status": "resolved",
                                "payload": {"approved": True}}])  # fmt: skip
    result = resumed.of(EventType.TOOL_CALL_RESULT)[0]
    assert (result["tool_call_id"], result["content"]) == (call_id, "Sent 5")
    assert resumed.text == "transfer returned: Sent 5"
    assert resumed.of(EventType.RUN_FINISHED)[0].get("outcome") is None


def test_a_failed_turn_ends_the_run_with_run_error_naming_the_cause(served: Served) -> None:
    chat = client(served)
    chat.say("/fail")
    failed = chat.run()
    assert failed.kinds == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
    error = failed.of(EventType.RUN_ERROR)[0]
    assert error["code"] == "turn_failed"
    assert "The model refused the request." in error["message"]


def test_a_thread_made_through_the_api_is_the_run_and_its_secrets_never_leave(
    served: Served,
) -> None:
    headers = {"Authorization": f"Bearer {served.key}"}
    created = httpx.post(
        f"{served.url}{THREADS}",
        headers=headers,
        json={"agent": "planner", "env": {"TOKEN": "tok-8f3k2"}, "env_types": {"TOKEN": "secret"}},
    ).json()
    chat = client(served, thread_id=created["id"], state={"note": "my tok-8f3k2"})
    chat.say("/tool sign {}")
    run = chat.run()
    assert run.headers["x-sa-thread-id"] == created["id"]
    assert run.of(EventType.STATE_SNAPSHOT)[0]["snapshot"] == {"note": "my [redacted]"}
    delta = run.of(EventType.STATE_DELTA)[0]["delta"]
    assert delta == [{"op": "add", "path": "/signature", "value": "signed with [redacted]"}]
    assert "tok-8f3k2" not in json.dumps([e.model_dump() for e in run.events])
    chat.say('/tool announce {"text": "halfway"}')
    custom = chat.run().of(EventType.CUSTOM)
    assert [(e["name"], e["value"]) for e in custom] == [("progress", {"note": "halfway"})]
    assert chat.state == {"note": "my [redacted]", "signature": "signed with [redacted]"}


def test_requests_that_cannot_run_are_refused_before_the_stream(served: Served) -> None:
    chat = Client(f"{served.url}{PLANNER}", None)
    chat.say("Hi")
    unauthenticated = chat.run()
    assert unauthenticated.status == 401
    assert unauthenticated.headers["www-authenticate"].startswith("Bearer")
    assert unauthenticated.body["error"] == "unauthorized"
    nobody = Client(f"{served.url}/ag-ui/agui_kit/nobody", served.key).run()
    assert (nobody.status, nobody.body["error"]) == (404, "agent_not_found")
    assert "/ag-ui/agui_kit/planner" in nobody.body["detail"]
    headers = {"Authorization": f"Bearer {served.key}"}
    bad = httpx.post(
        f"{served.url}{PLANNER}",
        headers=headers,
        json={"threadId": "", "messages": [{"id": "m", "role": "user"}], "state": ["x"]},
    )
    assert bad.status_code == 400
    assert bad.json() == {
        "error": "invalid_input",
        "detail": "Invalid RunAgentInput: runId: Field required. messages.0.user.content: Field "
        "required. threadId: expected 1 to 256 characters. state: expected an object (each "
        "key becomes a thread value), got list.",
    }
    reserved = Client(chat.url, served.key, state={"sa:approvals": {}}).run()
    assert reserved.status == 400 and "state.sa:approvals" in reserved.body["detail"]
    closed = Client(f"{served.url}/ag-ui/agui_kit/closed", served.key, tools=[CONFIRM]).run()
    assert (closed.status, closed.body["error"]) == (400, "tools_refused")
    assert "does not take client tools" in closed.body["detail"]


def test_neither_the_public_api_nor_building_the_app_loads_ag_ui() -> None:
    code = (
        "import sys\n"
        "from sa_core import Pack, Runtime, define_agent\n"
        "from sa_core.server import create_app\n"
        "app = create_app(Runtime(packs=[], database_url='sqlite:///:memory:',"
        " load_entrypoints=False))\n"
        "assert any(r.path.startswith('/ag-ui/') for r in app.routes)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ag_ui'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stderr


def test_state_changes_are_json_patches_of_top_level_keys_with_pointers_escaped() -> None:
    from agui_client import apply_patch

    from sa_core.server.protocols.agui.state import changes, patch, pointer

    assert pointer("a/b~c") == "/a~1b~0c"
    state: dict[str, Any] = {"kept": 1, "gone": 2, "a/b~c": 3}
    assert patch(state, "kept", 1) == []  # unchanged: nothing to send
    assert patch(state, "sa:approvals", {}) == []  # the runtime's own: never in the state
    before = dict(state)
    ops = changes(state, {"kept": 1, "a/b~c": [4], "new": None})
    assert ops == [
        {"op": "replace", "path": "/a~1b~0c", "value": [4]},
        {"op": "add", "path": "/new", "value": None},
        {"op": "remove", "path": "/gone"},
    ]
    assert apply_patch(before, ops) == state == {"kept": 1, "a/b~c": [4], "new": None}


def test_an_input_with_media_parts_names_each_and_reasoning_messages_are_left_out() -> None:
    from sa_core.server.errors import ApiError
    from sa_core.server.protocols.agui.inputs import read_input

    image = {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}
    body = {
        "threadId": "t", "runId": "r",
        "messages": [
            {"id": "d", "role": "developer", "content": "Be brief."},
            {"id": "r", "role": "reasoning", "content": "thinking"},
            {"id": "u", "role": "user", "content": [{"type": "text", "text": "Hi "}, image]},
        ],
    }  # fmt: skip
    with pytest.raises(ApiError) as refused:
        read_input(body)
    assert refused.value.detail == (
        "Invalid RunAgentInput: messages.2.content.1: only text parts are served (got 'image'); "
        "send files through the thread's files API."
    )
    parts = [{"type": "text", "text": "Hi "}, {"type": "text", "text": "!"}]
    body["messages"][2]["content"] = parts
    given = read_input(body)
    assert [(s.role, s.text) for s in given.messages] == [("system", "Be brief."), ("user", "Hi !")]
