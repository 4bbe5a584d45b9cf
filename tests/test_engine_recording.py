"""A recorded run: every model answer used is stored with its request's hash, in its step's commit.

Runs on SQLite and PostgreSQL (``test_engine_*``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import BaseModel

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.engine.model.recording import RECORD_ENV
from sa_core.testing import FunctionProvider, TestProvider, TestScript


class Note(BaseModel):
    text: str


def tool_pack(prompt_text: str = "You keep notes.", *, record: bool = True) -> Pack:
    async def note(state: Any, args: Note) -> str:
        await state.write_file("/notes.txt", f"{args.text} with token {state.env('API_TOKEN')}")
        return f"noted {args.text} (token {state.env('API_TOKEN')})"

    return Pack(
        name="notes",
        agents=[
            define_agent(
                name="keeper",
                side_a={"prompt": "main"},
                variables=[{"name": "API_TOKEN", "type": "secret", "required": False}],
            )
        ],
        prompts=[
            define_prompt(
                name="main",
                model="m",
                prompt=prompt_text + " Token: {{API_TOKEN}}",
                include_chat=True,
                tools=["note"],
            )
        ],
        models=[define_model(name="m", provider="test", model="x", record=record)],
        tools=[define_tool(name="note", description="Keep a note.", args=Note, execute=note)],
    )


def note_script() -> TestScript:
    return (
        TestScript()
        .add_tool_call_response(
            [{"name": "note", "arguments": {"text": "milk"}}],
            usage={"prompt_tokens": 11, "completion_tokens": 3},
        )
        .add_text_response("Noted.", usage={"prompt_tokens": 20, "completion_tokens": 2})
    )


@pytest.mark.asyncio
async def test_every_answer_used_is_recorded_with_its_log_and_message(
    sa_runtime_factory: Any,
) -> None:
    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": TestProvider(note_script())}
    ) as rt:
        thread = await rt.create_thread("keeper")
        await thread.send_message("buy milk")
        await rt.wait_idle(timeout=30)
        calls = await rt.store.list_model_calls(thread.thread_id)
        logs = await thread.get_logs(limit=100, order="asc")
        messages = (await thread.get_messages()).messages

    used = [log for log in logs if log.type == "llm_call" and not log.data.get("error")]
    assert [c.log_id for c in calls] == [log.id for log in used]
    answers = [m for m in messages if m.role == "assistant"]
    assert [c.message_id for c in calls] == [m.id for m in answers]
    first, second = calls
    assert first.response["tool_calls"][0]["name"] == "note"
    assert first.response["tool_calls"][0]["arguments"] == {"text": "milk"}
    assert first.response["finish_reason"] == "tool_calls"
    assert first.response["usage"]["prompt_tokens"] == 11
    assert second.response["content"] == "Noted."
    assert second.response["finish_reason"] == "stop"
    assert second.request["count"] == first.request["count"] + 2  # the answer and its result
    assert len({first.request_hash, second.request_hash}) == 2
    assert first.request["texts"]["system"][0].startswith("You keep notes.")
    assert "note" in first.request["texts"]["tools"]
    assert "texts" not in second.request  # same prompt and tools: the words are kept once


@pytest.mark.asyncio
async def test_a_prompt_tools_and_settings_are_stored_once_for_every_thread_that_sends_them(
    sa_runtime_factory: Any,
) -> None:
    from sqlalchemy import func, select

    from sa_core.store import tables as t

    script = note_script()
    for _ in range(2):
        script = script.add_tool_call_response([{"name": "note", "arguments": {"text": "tea"}}])
        script = script.add_text_response("Noted.")
    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": TestProvider(script)}
    ) as rt:
        threads = [await rt.create_thread("keeper") for _ in range(3)]
        for thread in threads:
            await thread.send_message("buy milk")
            await rt.wait_idle(timeout=30)
        recorded = [await rt.store.list_model_calls(one.thread_id) for one in threads]
        query = select(func.count()).select_from(t.request_parts)
        rows = await rt.store.read(lambda conn: conn.execute(query).scalar_one())

    assert rows == 1  # one prompt, one tool, one set of settings: one row for six calls
    for calls in recorded:  # each thread's first call still reads with the words
        assert calls[0].request["texts"]["system"][0].startswith("You keep notes.")
        assert "texts" not in calls[1].request
        assert calls[0].request["tools"] == recorded[0][0].request["tools"]
        assert calls[1].response["usage"]["total_tokens"] == (
            calls[1].response["usage"]["prompt_tokens"]
            + calls[1].response["usage"]["completion_tokens"]
        )
    assert recorded[0][0].request_hash == recorded[1][0].request_hash  # ids normalised out


@pytest.mark.asyncio
async def test_the_request_hash_leaves_out_ids_and_timestamps(sa_runtime_factory: Any) -> None:
    def answer(request: Any) -> Any:
        if request.messages[-1].role == "user":
            return {"tool_calls": [{"name": "note", "arguments": {"text": "tea"}}]}
        return "Done."

    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": FunctionProvider(answer)}
    ) as rt:
        hashes = []
        for _ in range(2):
            thread = await rt.create_thread("keeper")
            await thread.send_message("note tea at 2026-01-02T10:11:12Z")
            await rt.wait_idle(timeout=30)
            hashes.append(
                [c.request_hash for c in await rt.store.list_model_calls(thread.thread_id)]
            )
    # two threads, other ids, other tool-call ids, other times: the same requests
    assert hashes[0] == hashes[1]
    assert len(hashes[0]) == 2


@pytest.mark.asyncio
async def test_a_changed_word_of_the_prompt_changes_the_hash(sa_runtime_factory: Any) -> None:
    recorded = []
    for text in ("You keep notes.", "You keep lists."):
        async with sa_runtime_factory(
            packs=[tool_pack(text)], providers={"test": TestProvider(note_script())}
        ) as rt:
            thread = await rt.create_thread("keeper")
            await thread.send_message("buy milk")
            await rt.wait_idle(timeout=30)
            recorded.append(await rt.store.list_model_calls(thread.thread_id))
    assert recorded[0][0].request_hash != recorded[1][0].request_hash
    assert recorded[0][0].request["system"] != recorded[1][0].request["system"]
    assert recorded[0][0].request["tools"] == recorded[1][0].request["tools"]
    assert recorded[0][0].request["messages"] == recorded[1][0].request["messages"]


@pytest.mark.asyncio
async def test_secret_values_never_appear_in_a_recording(sa_runtime_factory: Any) -> None:
    secret = "sk-very-secret-value-123"
    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": TestProvider(note_script())}
    ) as rt:
        thread = await rt.create_thread("keeper", env={"API_TOKEN": secret})
        await thread.send_message("buy milk")
        await rt.wait_idle(timeout=30)
        calls = await rt.store.list_model_calls(thread.thread_id)
        messages = (await thread.get_messages()).messages
    assert len(calls) == 2
    text = json.dumps([c.to_json() for c in calls])
    assert secret not in text
    tool_row = next(m for m in messages if m.role == "tool")
    assert "[redacted]" in (tool_row.content or "")  # the tool did read it


@pytest.mark.asyncio
async def test_a_model_defined_with_record_false_keeps_only_its_usage_logs(
    sa_runtime_factory: Any,
) -> None:
    async with sa_runtime_factory(
        packs=[tool_pack(record=False)], providers={"test": TestProvider(note_script())}
    ) as rt:
        thread = await rt.create_thread("keeper")
        await thread.send_message("buy milk")
        await rt.wait_idle(timeout=30)
        assert await rt.store.list_model_calls(thread.thread_id) == []
        logs = await thread.get_logs(limit=100)
    assert len([log for log in logs if log.type == "llm_call"]) == 2


@pytest.mark.asyncio
async def test_calls_are_recorded_by_default(
    sa_runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RECORD_ENV, raising=False)
    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": TestProvider(note_script())}
    ) as rt:
        assert rt.kernel.models.recorder.enabled is True
        thread = await rt.create_thread("keeper")
        await thread.send_message("buy milk")
        await rt.wait_idle(timeout=30)
        calls = await rt.store.list_model_calls(thread.thread_id)
        logs = await thread.get_logs(limit=100)
        assert len(calls) == len([log for log in logs if log.type == "llm_call"]) == 2


@pytest.mark.asyncio
async def test_the_process_setting_turns_recording_off(
    sa_runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RECORD_ENV, "0")
    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": TestProvider(note_script())}
    ) as rt:
        assert rt.kernel.models.recorder.enabled is False
        thread = await rt.create_thread("keeper")
        await thread.send_message("buy milk")
        await rt.wait_idle(timeout=30)
        assert await rt.store.list_model_calls(thread.thread_id) == []


@pytest.mark.asyncio
async def test_a_fallback_answer_is_recorded_and_the_failed_attempts_are_not(
    sa_runtime_factory: Any,
) -> None:
    def primary(request: Any) -> Any:
        return {"error": {"message": "bad key", "code": "auth_error"}}

    pack = Pack(
        name="fb",
        agents=[define_agent(name="a", side_a={"prompt": "p"})],
        prompts=[define_prompt(name="p", model="main", prompt="Hi.")],
        models=[
            define_model(name="main", provider="broken", model="big", fallbacks=["spare"]),
            define_model(name="spare", provider="test", model="small"),
        ],
    )
    providers = {
        "broken": FunctionProvider(primary, name="broken"),
        "test": FunctionProvider(lambda request: "from the spare"),
    }
    async with sa_runtime_factory(packs=[pack], providers=providers) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("hello")
        await rt.wait_idle(timeout=30)
        calls = await rt.store.list_model_calls(thread.thread_id)
        logs = await thread.get_logs(limit=100, order="asc")
    assert len(calls) == 1
    assert calls[0].request["model"] == "small"
    assert calls[0].response["content"] == "from the spare"
    used = [log for log in logs if log.type == "llm_call" and not log.data.get("error")]
    assert [c.log_id for c in calls] == [used[0].id]


@pytest.mark.asyncio
async def test_an_export_leaves_secret_values_out_and_still_replays(
    sa_runtime_factory: Any, tmp_path: Any
) -> None:
    secret = "sk-very-secret-value-123"
    async with sa_runtime_factory(
        packs=[tool_pack()], providers={"test": TestProvider(note_script())}
    ) as rt:
        thread = await rt.create_thread("keeper", env={"API_TOKEN": secret, "CITY": "Oslo"})
        await thread.send_message("buy milk")
        await rt.wait_idle(timeout=30)
        document = await thread.export()
    text = json.dumps(document)
    assert secret not in text
    root = document["thread"]
    assert root["env"] == {"CITY": "Oslo"} and root["secrets"] == ["API_TOKEN"]
    (note,) = [f for f in root["files"] if f["path"] == "/notes.txt"]
    assert base64.b64decode(note["data"]) == b"milk with token [redacted]"

    fresh = Runtime(
        packs=[tool_pack()],
        providers={},
        database_url=f"sqlite:///{tmp_path / 'replay.db'}",
        load_entrypoints=False,
    )
    async with fresh:
        report = await fresh.replay_thread(document)
    assert report.identical, str(report)


@pytest.mark.asyncio
async def test_a_recorded_hash_equals_the_hash_of_the_request_made_again_from_scratch(
    sa_runtime_factory: Any,
) -> None:
    """Each step extends the thread's running hash without comparing messages again; the
    hashes it records are those of each whole request hashed alone, for every call of a
    multi-step tree with tool calls, children and an approval."""
    from types import SimpleNamespace

    from replay_desk import desk_model, desk_pack, run_desk

    from sa_core.engine.model.recording import Recorder

    provider = desk_model()
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        await run_desk(rt)
        by_thread: dict[str, list[Any]] = {}
        for request in provider.requests:
            by_thread.setdefault(str(request.user), []).append(request)
        recorded = {tid: await rt.store.list_model_calls(tid) for tid in by_thread}
        alone = Recorder(rt.store, enabled=True)
        unattached = SimpleNamespace(execution=None)  # no running hash to extend
        remade = {
            tid: [alone.digest(unattached, r).hash for r in requests]  # type: ignore[arg-type]
            for tid, requests in by_thread.items()
        }

    assert len(by_thread) >= 3  # the lead and its children
    assert max(len(requests) for requests in by_thread.values()) >= 4
    assert {tid: [c.request_hash for c in calls] for tid, calls in recorded.items()} == remade
