"""Client tools over the OpenAI-compatible API, through the official ``openai`` client.

The server hosts the ``clienttools_kit`` test plugin (``tests/clienttools_kit``): its model
calls the tools a message names, is forced by a named ``tool_choice``, reports the tools it was
offered otherwise, and after tool results answers ``NAME returned: RESULT``. Each test runs a
live ``sa serve``; the restart and worker tests run two.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai_serve import Served
from pydantic import BaseModel

from sa_core.store import open_store

KIT = Path(__file__).parent / "clienttools_kit"
DESK = "tools_kit/desk"
THREADS = "/api/packages/tools_kit/threads"
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
CHAT_WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": WEATHER_PARAMETERS,
    },
}
RESPONSES_WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": WEATHER_PARAMETERS,
}
ASK = '/tool get_weather {"city": "Paris"}'


class Reminder(BaseModel):
    text: str
    minutes: int


def kit_server(tmp: Path, database: str, *extra: str, key: str = "") -> Served:
    return Served(tmp, database, *extra, key=key, test_provider=False, pythonpath=[KIT]).start()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = kit_server(tmp_path, f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        yield server
    finally:
        server.stop()


def sdk(server: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=server.key, max_retries=0, timeout=60)


def messages_of(server: Served, thread_id: str) -> list[tuple[str, str | None]]:
    response = httpx.get(
        f"{server.url}{THREADS}/{thread_id}/messages",
        params={"limit": 100},
        headers={"Authorization": f"Bearer {server.key}"},
    )
    assert response.status_code == 200, response.text
    return [(m["role"], m["content"]) for m in response.json()["messages"]]


def chat_pause(server: Served, messages: list[Any]) -> tuple[str, Any]:
    """Ask for the weather through a client tool: the thread id and the assistant message."""
    raw = sdk(server).chat.completions.with_raw_response.create(
        model=DESK, messages=messages, tools=[CHAT_WEATHER]
    )
    choice = raw.parse().choices[0]
    assert choice.finish_reason == "tool_calls"
    return raw.headers["x-sa-thread-id"], choice.message


def with_result(messages: list[Any], message: Any, output: str) -> list[Any]:
    call = message.tool_calls[0]
    return [
        *messages,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": output},
    ]


def test_a_chat_client_tool_call_is_returned_and_its_result_ends_the_turn(served: Served) -> None:
    asked: list[Any] = [{"role": "user", "content": ASK}]
    thread_id, message = chat_pause(served, asked)
    call = message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert message.content is None
    conversation = with_result(asked, message, "Sunny")
    raw = sdk(served).chat.completions.with_raw_response.create(
        model=DESK, messages=conversation, tools=[CHAT_WEATHER]
    )
    assert raw.headers["x-sa-thread-id"] == thread_id
    answer = raw.parse().choices[0]
    assert (answer.finish_reason, answer.message.content) == ("stop", "get_weather returned: Sunny")
    assert answer.message.tool_calls is None
    assert messages_of(served, thread_id) == [
        ("user", ASK), ("assistant", None), ("tool", "Sunny"),
        ("assistant", "get_weather returned: Sunny"),
    ]  # fmt: skip
    follow = [*conversation, answer.message.model_dump(exclude_none=True),
              {"role": "user", "content": "thanks"}]  # fmt: skip
    again = sdk(served).chat.completions.with_raw_response.create(model=DESK, messages=follow)
    assert again.headers["x-sa-thread-id"] == thread_id
    assert json.loads(again.parse().choices[0].message.content or "")["tools"] == ["count_words"]


def test_streamed_chat_returns_the_call_as_deltas_and_streams_the_rest(served: Served) -> None:
    asked: list[Any] = [{"role": "user", "content": ASK}]
    client = sdk(served)
    with client.chat.completions.with_streaming_response.create(
        model=DESK, messages=asked, tools=[CHAT_WEATHER], stream=True
    ) as response:
        thread_id = response.headers["x-sa-thread-id"]
        chunks = [c for c in response.parse() if c.choices]
    deltas = [d for c in chunks for d in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.type, d.function.name) for d in deltas] == [
        (0, "function", "get_weather")
    ]
    assert json.loads(deltas[0].function.arguments or "") == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assistant = {
        "role": "assistant",
        "tool_calls": [
            {"id": deltas[0].id, "type": "function",
             "function": {"name": "get_weather", "arguments": deltas[0].function.arguments}}
        ],
    }  # fmt: skip
    result = {"role": "tool", "tool_call_id": deltas[0].id, "content": "Rain"}
    with client.chat.completions.with_streaming_response.create(
        model=DESK, messages=[*asked, assistant, result], tools=[CHAT_WEATHER], stream=True
    ) as response:
        assert response.headers["x-sa-thread-id"] == thread_id
        rest = [c for c in response.parse() if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in rest) == "get_weather returned: Rain"
    assert rest[-1].choices[0].finish_reason == "stop"


def test_agent_tools_of_the_same_step_run_on_the_server(served: Served) -> None:
    both = '/tools count_words get_weather {"text": "a b c", "city": "Rome"}'
    asked: list[Any] = [{"role": "user", "content": both}]
    thread_id, message = chat_pause(served, asked)
    assert [c.function.name for c in message.tool_calls] == ["get_weather"]
    answer = sdk(served).chat.completions.create(
        model=DESK, messages=with_result(asked, message, "Warm"), tools=[CHAT_WEATHER]
    )
    assert answer.choices[0].message.content == (
        "count_words returned: 3 words\nget_weather returned: Warm"
    )


def test_a_responses_function_call_and_its_output_continue_the_same_turn(served: Served) -> None:
    client = sdk(served)
    raw = client.responses.with_raw_response.create(
        model=DESK, input=ASK, tools=[RESPONSES_WEATHER]
    )
    thread_id = raw.headers["x-sa-thread-id"]
    first = raw.parse()
    assert first.status == "completed" and first.output_text == ""
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "Fog"}
    raw = client.responses.with_raw_response.create(
        model=DESK, input=[output], previous_response_id=first.id, tools=[RESPONSES_WEATHER]
    )
    assert raw.headers["x-sa-thread-id"] == thread_id
    second = raw.parse()
    assert second.output_text == "get_weather returned: Fog"
    assert second.id != first.id and second.previous_response_id == first.id
    assert client.responses.retrieve(first.id).output[0].type == "function_call"
    assert client.responses.retrieve(second.id).output_text == "get_weather returned: Fog"
    third = client.responses.with_raw_response.create(
        model=DESK, input="thanks", previous_response_id=second.id
    )
    assert third.headers["x-sa-thread-id"] == thread_id
    assert messages_of(served, thread_id)[:4] == [
        ("user", ASK), ("assistant", None), ("tool", "Fog"),
        ("assistant", "get_weather returned: Fog"),
    ]  # fmt: skip


def test_streamed_responses_emit_the_function_call_events(served: Served) -> None:
    client = sdk(served)
    with client.responses.stream(model=DESK, input=ASK, tools=[RESPONSES_WEATHER]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    [call] = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris"}
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "Hail"}
    with client.responses.stream(
        model=DESK, input=[output], previous_response_id=final.id, tools=[RESPONSES_WEATHER]
    ) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert text == "get_weather returned: Hail"


def test_responses_input_carrying_the_calls_and_outputs_continues_the_thread(
    served: Served,
) -> None:
    client = sdk(served)
    asked = {"role": "user", "content": ASK}
    raw = client.responses.with_raw_response.create(
        model=DESK, input=[asked], tools=[RESPONSES_WEATHER]
    )
    thread_id = raw.headers["x-sa-thread-id"]
    [call] = raw.parse().output
    history: list[Any] = [
        asked,
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "Mist"},
    ]
    raw = client.responses.with_raw_response.create(
        model=DESK, input=history, tools=[RESPONSES_WEATHER]
    )
    assert raw.headers["x-sa-thread-id"] == thread_id
    assert raw.parse().output_text == "get_weather returned: Mist"


def test_tool_choice_is_honoured(served: Served) -> None:
    client = sdk(served)
    hi: list[Any] = [{"role": "user", "content": "which tools?"}]

    def offered(**asked: Any) -> Any:
        reply = client.chat.completions.create(model=DESK, messages=hi, **asked)
        return json.loads(reply.choices[0].message.content or "")

    assert offered(tools=[CHAT_WEATHER]) == {
        "tools": ["count_words", "get_weather"], "tool_choice": "auto"
    }  # fmt: skip
    assert offered(tools=[CHAT_WEATHER], tool_choice="none")["tools"] == ["count_words"]
    assert offered(tools=[CHAT_WEATHER], tool_choice="required")["tool_choice"] == "required"
    assert offered() == {"tools": ["count_words"], "tool_choice": "auto"}
    # a forced single tool: structured output by tool, as the SDK's parse helper reads it
    reminder = openai.pydantic_function_tool(Reminder)
    parsed = client.chat.completions.parse(
        model=DESK,
        messages=[{"role": "user", "content": '{"text": "tea", "minutes": 5}'}],
        tools=[reminder],
        tool_choice={"type": "function", "function": {"name": "Reminder"}},
    )
    choice = parsed.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].function.parsed_arguments == Reminder(text="tea", minutes=5)
    forced = client.responses.create(
        model=DESK,
        input='{"text": "nap", "minutes": 20}',
        tools=[
            {"type": "function", "name": "Reminder", "parameters": Reminder.model_json_schema()}
        ],
        tool_choice={"type": "function", "name": "Reminder"},
    )
    [call] = forced.output
    assert Reminder.model_validate_json(call.arguments) == Reminder(text="nap", minutes=20)


def test_refused_client_tools_name_the_field(served: Served) -> None:
    client = sdk(served)
    hi: list[Any] = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError, match="does not take client tools") as closed:
        client.chat.completions.create(model="tools_kit/closed", messages=hi, tools=[CHAT_WEATHER])
    assert closed.value.param == "tools"
    with pytest.raises(openai.BadRequestError, match="does not take client tools") as closed:
        client.responses.create(model="tools_kit/closed", input="hi", tools=[RESPONSES_WEATHER])
    assert closed.value.param == "tools"
    clash = {"type": "function", "function": {"name": "count_words", "parameters": {}}}
    with pytest.raises(openai.BadRequestError, match="'count_words' is the name") as named:
        client.chat.completions.create(model=DESK, messages=hi, tools=[clash])
    assert named.value.param == "tools[0].function.name"
    with pytest.raises(openai.BadRequestError, match="only function tools") as kind:
        client.responses.create(model=DESK, input="hi", tools=[{"type": "web_search"}])
    assert kind.value.param == "tools[0].type"
    with pytest.raises(openai.BadRequestError, match="not a declared client tool") as choice:
        client.chat.completions.create(
            model=DESK, messages=hi, tools=[CHAT_WEATHER],
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )  # fmt: skip
    assert choice.value.param == "tool_choice"
    listed = httpx.get(f"{served.url}{THREADS}", headers={"Authorization": f"Bearer {served.key}"})
    assert listed.json()["threads"] == []  # nothing refused started a thread


def test_a_paused_turn_takes_its_results_only(served: Served) -> None:
    client = sdk(served)
    asked: list[Any] = [{"role": "user", "content": ASK}]
    _, message = chat_pause(served, asked)
    wrong = with_result(asked, message, "x")
    wrong[-1]["tool_call_id"] = "call_unknown"
    with pytest.raises(openai.BadRequestError, match="call_unknown"):
        client.chat.completions.create(model=DESK, messages=wrong, tools=[CHAT_WEATHER])
    skipped = [*asked, message.model_dump(exclude_none=True), {"role": "user", "content": "?"}]
    with pytest.raises(openai.BadRequestError, match="must follow the assistant message") as early:
        client.chat.completions.create(model=DESK, messages=skipped, tools=[CHAT_WEATHER])
    assert early.value.param == "messages[1]"
    paused = client.responses.create(model=DESK, input=ASK, tools=[RESPONSES_WEATHER])
    with pytest.raises(openai.BadRequestError, match="awaits the results of its client tool"):
        client.responses.create(model=DESK, input="?", previous_response_id=paused.id)
    right = client.chat.completions.create(
        model=DESK, messages=with_result(asked, message, "Calm"), tools=[CHAT_WEATHER]
    )
    assert right.choices[0].message.content == "get_weather returned: Calm"


def test_a_paused_turn_continues_after_a_restart(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'sa.db'}"
    asked: list[Any] = [{"role": "user", "content": ASK}]
    server = kit_server(tmp_path, database)
    try:
        thread_id, message = chat_pause(server, asked)
        first = sdk(server).responses.create(model=DESK, input=ASK, tools=[RESPONSES_WEATHER])
    finally:
        server.stop()
    server = kit_server(tmp_path, database, key=server.key)
    try:
        raw = sdk(server).chat.completions.with_raw_response.create(
            model=DESK, messages=with_result(asked, message, "Snow"), tools=[CHAT_WEATHER]
        )
        assert raw.headers["x-sa-thread-id"] == thread_id
        assert raw.parse().choices[0].message.content == "get_weather returned: Snow"
        output = {"type": "function_call_output", "call_id": first.output[0].call_id,
                  "output": "Sleet"}  # fmt: skip
        second = sdk(server).responses.create(
            model=DESK, input=[output], previous_response_id=first.id, tools=[RESPONSES_WEATHER]
        )
        assert second.output_text == "get_weather returned: Sleet"
    finally:
        server.stop()


@pytest.fixture
def workers(tmp_path: Path, pg_database_url: str) -> Iterator[list[Served]]:
    async def key() -> str:
        async with await open_store(pg_database_url) as store:
            return (await store.create_api_key("client-tools-tests"))[0]

    token = asyncio.run(key())
    started: list[Served] = []
    try:
        for _ in range(2):
            started.append(kit_server(tmp_path, pg_database_url, "--lease-seconds", "2", key=token))
        yield started
    finally:
        for worker in started:
            worker.stop()


def test_the_results_reach_a_turn_paused_on_another_worker(workers: list[Served]) -> None:
    one, two = workers
    asked: list[Any] = [{"role": "user", "content": ASK}]
    thread_id, message = chat_pause(one, asked)
    raw = sdk(two).chat.completions.with_raw_response.create(
        model=DESK, messages=with_result(asked, message, "Breezy"), tools=[CHAT_WEATHER]
    )
    assert raw.headers["x-sa-thread-id"] == thread_id
    assert raw.parse().choices[0].message.content == "get_weather returned: Breezy"
    first = sdk(two).responses.create(model=DESK, input=ASK, tools=[RESPONSES_WEATHER])
    output = {"type": "function_call_output", "call_id": first.output[0].call_id,
              "output": "Still"}  # fmt: skip
    second = sdk(one).responses.create(
        model=DESK, input=[output], previous_response_id=first.id, tools=[RESPONSES_WEATHER]
    )
    assert second.output_text == "get_weather returned: Still"
    assert messages_of(one, thread_id)[-2:] == [
        ("tool", "Breezy"), ("assistant", "get_weather returned: Breezy")
    ]


def test_a_forced_tools_call_taken_as_the_answer_ends_its_turn_for_the_next_message(
    served: Served,
) -> None:
    client = sdk(served)
    reminder: Any = openai.pydantic_function_tool(Reminder)
    asked: list[Any] = [{"role": "user", "content": '{"text": "tea", "minutes": 5}'}]
    raw = client.chat.completions.with_raw_response.create(
        model=DESK, messages=asked, tools=[reminder],
        tool_choice={"type": "function", "function": {"name": "Reminder"}},
    )  # fmt: skip
    thread_id = raw.headers["x-sa-thread-id"]
    message = raw.parse().choices[0].message
    # as pydantic-ai keeps it: the output tool's call, a result it made up, the next message
    follow = [
        *with_result(asked, message, "Final result processed."),
        {"role": "user", "content": "thanks"},
    ]
    again = client.chat.completions.with_raw_response.create(model=DESK, messages=follow)
    assert again.headers["x-sa-thread-id"] == thread_id
    assert json.loads(again.parse().choices[0].message.content or "")["tools"] == ["count_words"]
    assert messages_of(served, thread_id) == [
        ("user", '{"text": "tea", "minutes": 5}'), ("assistant", None),
        ("tool", "Final result processed."), ("user", "thanks"),
        ("assistant", '{"tools": ["count_words"], "tool_choice": "auto"}'),
    ]  # fmt: skip
    first = client.responses.create(
        model=DESK, input='{"text": "nap", "minutes": 20}',
        tools=[{"type": "function", "name": "Reminder", "parameters": {"type": "object"}}],
        tool_choice={"type": "function", "name": "Reminder"},
    )  # fmt: skip
    output = {"type": "function_call_output", "call_id": first.output[0].call_id, "output": "ok"}
    second = client.responses.create(
        model=DESK, input=[output, {"role": "user", "content": "thanks"}],
        previous_response_id=first.id,
    )  # fmt: skip
    assert json.loads(second.output_text)["tools"] == ["count_words"]
