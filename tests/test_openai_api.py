"""The OpenAI-compatible API through the official ``openai`` client, on a live ``sa serve``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai_serve import MODEL, Served
from pydantic import BaseModel

from sa_core.store import open_store

REPLY = "Test response received."
THREADS = "/api/packages/reminders/threads"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, f"sqlite:///{tmp_path / 'sa.db'}").start()
    try:
        yield server
    finally:
        server.stop()


def client(server: Served, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key=key or server.key, max_retries=0, timeout=60
    )


def api(server: Served, path: str, **params: Any) -> Any:
    response = httpx.get(
        server.url + path, params=params, headers={"Authorization": f"Bearer {server.key}"}
    )
    assert response.status_code == 200, response.text
    return response.json()


def contents(server: Served, thread_id: str) -> list[tuple[str, str | None]]:
    page = api(server, f"{THREADS}/{thread_id}/messages", limit=100)
    return [(m["role"], m["content"]) for m in page["messages"]]


def test_models_list_names_every_entry_agent(served: Served) -> None:
    models = [m.id for m in client(served).models.list()]
    assert MODEL in models
    assert all(name.count("/") == 1 for name in models)
    assert client(served).models.retrieve(MODEL).owned_by == "reminders"


def test_chat_completion_then_a_follow_up_lands_on_the_same_thread(served: Served) -> None:
    sdk = client(served)
    first = sdk.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    )
    thread_id = first.headers["x-sa-thread-id"]
    answer = first.parse()
    assert answer.choices[0].message.content == REPLY
    assert answer.model == MODEL
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    follow = sdk.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": REPLY},
            {"role": "user", "content": "And again?"},
        ],
    )
    assert follow.headers["x-sa-thread-id"] == thread_id
    assert follow.parse().choices[0].message.content == REPLY
    assert contents(served, thread_id) == [
        ("system", "Be brief."), ("user", "Hi"), ("assistant", REPLY),
        ("user", "And again?"), ("assistant", REPLY),
    ]  # fmt: skip
    listed = api(served, THREADS, tag="openai")
    assert [t["id"] for t in listed["threads"]] == [thread_id]


def test_streamed_chat_completion_with_usage_and_a_streamed_follow_up(served: Served) -> None:
    sdk = client(served)
    messages: list[Any] = [{"role": "user", "content": "Stream please"}]
    with sdk.chat.completions.with_streaming_response.create(
        model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
    ) as response:
        thread_id = response.headers["x-sa-thread-id"]
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == REPLY
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0
    messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "More"}]
    again = sdk.chat.completions.with_raw_response.create(model=MODEL, messages=messages)
    assert again.headers["x-sa-thread-id"] == thread_id
    assert [role for role, _ in contents(served, thread_id)] == ["user", "assistant"] * 2


def test_the_agents_own_tools_run_on_the_server(served: Served) -> None:
    sdk = client(served)
    asked = '/tool set_reminder {"text": "tea", "minutes": 5}'
    answer = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": asked}]
    )
    content = answer.choices[0].message.content or ""
    assert content.startswith("set_reminder returned: Reminder ")
    assert content.endswith(": tea")


def test_a_conversation_that_branched_starts_a_new_thread(served: Served) -> None:
    sdk = client(served)
    base: list[Any] = [{"role": "user", "content": "Hi"}]
    first = sdk.chat.completions.with_raw_response.create(model=MODEL, messages=base)
    thread_id = first.headers["x-sa-thread-id"]
    step = [*base, {"role": "assistant", "content": REPLY}]
    two = sdk.chat.completions.with_raw_response.create(
        model=MODEL, messages=[*step, {"role": "user", "content": "One way"}]
    )
    other = sdk.chat.completions.with_raw_response.create(
        model=MODEL, messages=[*step, {"role": "user", "content": "The other way"}]
    )
    assert two.headers["x-sa-thread-id"] == thread_id
    branched = other.headers["x-sa-thread-id"]
    assert branched != thread_id
    assert contents(served, branched)[-2:] == [("user", "The other way"), ("assistant", REPLY)]


def test_responses_continue_across_a_restart(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'sa.db'}"
    server = Served(tmp_path, database).start()
    try:
        first = client(server).responses.create(
            model=MODEL, input="Remember me", instructions="Be brief."
        )
        assert first.output_text == REPLY and first.status == "completed"
        assert first.usage is not None and first.usage.output_tokens > 0
    finally:
        server.stop()
    server = Served(tmp_path, database, key=server.key).start()
    try:
        sdk = client(server)
        second = sdk.responses.with_raw_response.create(
            model=MODEL, input="Still there?", previous_response_id=first.id
        )
        thread_id = second.headers["x-sa-thread-id"]
        answer = second.parse()
        assert answer.output_text == REPLY
        assert answer.previous_response_id == first.id
        assert contents(server, thread_id) == [
            ("system", "Be brief."), ("user", "Remember me"), ("assistant", REPLY),
            ("user", "Still there?"), ("assistant", REPLY),
        ]  # fmt: skip
        assert sdk.responses.retrieve(first.id).output_text == REPLY
        assert answer.conversation is not None
        third = sdk.responses.with_raw_response.create(
            model=MODEL, input="Via the conversation", conversation=answer.conversation.id
        )
        assert third.headers["x-sa-thread-id"] == thread_id
    finally:
        server.stop()


def test_streamed_response_emits_the_event_sequence(served: Served) -> None:
    sdk = client(served)
    with sdk.responses.stream(model=MODEL, input="Stream me") as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == REPLY
    follow = sdk.responses.create(model=MODEL, input="Next", previous_response_id=final.id)
    assert follow.conversation == final.conversation


def test_unknown_model_legacy_functions_and_bad_formats_are_refused(served: Served) -> None:
    sdk = client(served)
    hi: list[Any] = [{"role": "user", "content": "Hi"}]
    with pytest.raises(openai.BadRequestError, match="The model 'nope/agent' does not exist"):
        sdk.chat.completions.create(model="nope/agent", messages=hi)
    with pytest.raises(openai.BadRequestError, match="does not exist"):
        sdk.responses.create(model="reminders/nobody", input="Hi")
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        sdk.models.retrieve("reminders/nobody")
    legacy: Any = [{"name": "f", "parameters": {"type": "object"}}]
    with pytest.raises(openai.BadRequestError, match="'functions' is not supported") as refused:
        sdk.chat.completions.create(model=MODEL, messages=hi, functions=legacy)
    assert refused.value.param == "functions"
    with pytest.raises(openai.BadRequestError, match="only function tools") as hosted:
        sdk.responses.create(model=MODEL, input="Hi", tools=[{"type": "web_search"}])
    assert hosted.value.param == "tools[0].type"
    with pytest.raises(openai.BadRequestError, match="response_format.type") as structured:
        sdk.chat.completions.create(
            model=MODEL, messages=hi, response_format={"type": "xml"}  # type: ignore[arg-type]
        )
    assert structured.value.param == "response_format.type"
    with pytest.raises(openai.BadRequestError, match="json_schema.schema") as schemaless:
        sdk.chat.completions.create(
            model=MODEL,
            messages=hi,
            response_format={"type": "json_schema", "json_schema": {"name": "x"}},
        )
    assert schemaless.value.param == "response_format.json_schema.schema"
    with pytest.raises(openai.BadRequestError, match="not a valid JSON Schema"):
        sdk.responses.create(
            model=MODEL,
            input="Hi",
            text={"format": {"type": "json_schema", "name": "x", "schema": {"type": 1}}},
        )
    with pytest.raises(openai.BadRequestError, match="'n' is not supported"):
        sdk.chat.completions.create(model=MODEL, messages=hi, n=2)
    with pytest.raises(openai.NotFoundError, match="No response with id 'resp_bogus'"):
        sdk.responses.create(model=MODEL, input="Hi", previous_response_id="resp_bogus")


def test_a_response_is_not_continued_through_another_model(served: Served) -> None:
    sdk = client(served)
    first = sdk.responses.create(model=MODEL, input="Hi")
    with pytest.raises(openai.NotFoundError, match=f"No response with id '{first.id}'"):
        sdk.responses.create(
            model="content/content_lead", input="Hi", previous_response_id=first.id
        )


def test_missing_or_revoked_key_is_a_401_in_openais_shape(served: Served, tmp_path: Path) -> None:
    missing = httpx.get(f"{served.base_url}/models")
    assert missing.status_code == 401
    error = missing.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "Authorization: Bearer" in error["message"]

    async def new_key() -> tuple[str, str]:
        async with await open_store(f"sqlite:///{tmp_path / 'sa.db'}") as store:
            token, row = await store.create_api_key("revoked")
            return token, row.id

    async def revoke(key_id: str) -> None:
        async with await open_store(f"sqlite:///{tmp_path / 'sa.db'}") as store:
            assert await store.revoke_api_key(key_id)

    token, key_id = asyncio.run(new_key())
    assert [m.id for m in client(served, token).models.list()]
    asyncio.run(revoke(key_id))
    with pytest.raises(openai.AuthenticationError, match="Unknown or revoked API key"):
        client(served, token).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}]
        )


def test_the_docs_example_runs_as_written(served: Served, tmp_path: Path) -> None:
    document = (Path(__file__).resolve().parents[1] / "docs" / "protocols.md").read_text()
    example = document.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example.replace("http://127.0.0.1:8000/v1", served.base_url))
    ran = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "SA_API_KEY": served.key},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert MODEL in lines[0]
    assert lines[1:3] == [REPLY, REPLY]
    assert lines[3].startswith(f"{REPLY} conv_")


class Reminder(BaseModel):
    text: str
    minutes: int


REMINDER = '/tool final_answer {"text": "tea", "minutes": 5}'


def test_response_format_json_schema_answers_json_that_validates(served: Served) -> None:
    sdk = client(served)
    parsed = sdk.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": REMINDER}], response_format=Reminder
    )
    assert parsed.choices[0].message.parsed == Reminder(text="tea", minutes=5)
    thread_id = api(served, THREADS, tag="openai")["threads"][0]["id"]
    page = api(served, f"{THREADS}/{thread_id}/messages")
    assert page["messages"][-1]["output"] == {"text": "tea", "minutes": 5}
    schema = Reminder.model_json_schema()
    response = sdk.responses.create(
        model=MODEL,
        input=REMINDER,
        text={"format": {"type": "json_schema", "name": "reminder", "schema": schema}},
    )
    assert Reminder.model_validate_json(response.output_text) == Reminder(text="tea", minutes=5)
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "reminder", "schema": schema}}
    stream = sdk.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": REMINDER}],
        response_format=fmt,
        stream=True,
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert Reminder.model_validate_json(text) == Reminder(text="tea", minutes=5)
    plain = sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    assert plain.choices[0].message.content == REPLY  # no response_format: no schema


def test_response_format_answer_that_does_not_validate_fails_naming_the_field(
    served: Served,
) -> None:
    sdk = client(served)
    # minutes missing: rejected naming the field; the offline model's retry is not JSON either
    bad = '/tool final_answer {"text": "tea"}'
    with pytest.raises(openai.APIStatusError) as failed:
        sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": bad}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "reminder", "schema": Reminder.model_json_schema()},
            },
        )
    assert failed.value.status_code == 502
    message = str(failed.value)
    assert "does not match its output_schema" in message and "not valid JSON" in message
    thread_id = api(served, THREADS, tag="openai")["threads"][0]["id"]
    page = api(served, f"{THREADS}/{thread_id}/messages", include_silent=True)
    rejected = [m for m in page["messages"] if (m["metadata"] or {}).get("output_error")]
    assert rejected[0]["metadata"]["output_error"] == ["minutes: Field required"]
