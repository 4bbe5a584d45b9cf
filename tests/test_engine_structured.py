"""Structured output: a prompt's ``output_schema``, checked by the engine (see
docs/structured-output.md).

The offline test provider declares no native structured output, so the engine offers it the
forced ``final_answer`` tool; a FunctionProvider that declares support gets the schema on the
request instead.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.engine.model.structured import FINAL_TOOL, RETRY_CALL, StructuredOutputError, is_strict
from sa_core.providers import ProviderRequest
from sa_core.spec.schemas import json_schema_of
from sa_core.testing import FunctionProvider, TestProvider, TestScript


class Person(BaseModel):
    name: str
    age: int


PERSON_DICT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def pack_for(schema: Any, **prompt_fields: Any) -> Pack:
    prompt = define_prompt(
        name="extract",
        model="fast",
        prompt="Extract the person.",
        include_chat=True,
        output_schema=schema,
        **prompt_fields,
    )
    return Pack(
        name="s",
        agents=[define_agent(name="a", side_a={"prompt": "extract"})],
        prompts=[prompt],
        models=[define_model(name="fast", provider="test", model="m")],
    )


async def last_assistant(thread: Any) -> Any:
    messages = (await thread.get_messages(include_silent=True)).messages
    return [m for m in messages if m.role == "assistant"][-1]


@pytest.mark.asyncio
@pytest.mark.parametrize("schema", [Person, PERSON_DICT], ids=["pydantic", "dict"])
async def test_forced_final_tool_answer_is_validated_and_stored(sa_runtime_factory, schema):
    script = TestScript().add_tool_call_response(
        [{"name": FINAL_TOOL, "arguments": {"name": "Ada", "age": 36}}]
    )
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[pack_for(schema)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("Ada is 36.")
        message = await last_assistant(thread)
    request = provider.requests[0]
    assert request.output_schema is None  # no native support: the final tool instead
    assert [t.name for t in request.tools] == [FINAL_TOOL]
    assert request.tools[0].parameters["required"] == ["name", "age"]
    assert request.tool_choice == {"name": FINAL_TOOL}
    assert message.metadata["output"] == {"name": "Ada", "age": 36}
    assert json.loads(message.content) == {"name": "Ada", "age": 36}
    assert not message.tool_calls  # the final call ends the turn; it is not stored as a call


@pytest.mark.asyncio
async def test_native_provider_gets_the_schema_and_its_text_answer_is_parsed(sa_runtime_factory):
    seen: list[ProviderRequest] = []

    def answer(request: ProviderRequest) -> str:
        seen.append(request)
        return '```json\n{"name": "Ada", "age": 36}\n```'

    provider = FunctionProvider(answer, name="test")
    provider.supports_structured_output = True  # type: ignore[misc]
    async with sa_runtime_factory(packs=[pack_for(Person)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("Ada is 36.")
        message = await last_assistant(thread)
    output = seen[0].output_schema
    assert output is not None and output.name == "extract"
    assert output.schema["properties"]["age"] == {"title": "Age", "type": "integer"}
    assert output.strict is False  # pydantic's schema leaves additionalProperties open
    assert seen[0].tools == []
    assert message.metadata["output"] == {"name": "Ada", "age": 36}


@pytest.mark.asyncio
async def test_invalid_answer_is_retried_once_with_the_errors(sa_runtime_factory):
    script = (
        TestScript()
        .add_tool_call_response([{"name": FINAL_TOOL, "arguments": {"name": "Ada"}}])
        .add_tool_call_response([{"name": FINAL_TOOL, "arguments": {"name": "Ada", "age": 36}}])
    )
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[pack_for(Person)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("Ada is 36.")
        messages = (await thread.get_messages()).messages
    retry = provider.requests[1].messages
    assert retry[-1].role == "tool" and retry[-1].tool_name == FINAL_TOOL
    assert "prompt 'extract'" in retry[-1].content and "age: Field required" in retry[-1].content
    assert messages[-1].metadata["output"] == {"name": "Ada", "age": 36}
    rejected = [m for m in messages if (m.metadata or {}).get("output_error")]
    assert rejected and rejected[0].metadata["output_error"] == ["age: Field required"]


@pytest.mark.asyncio
async def test_second_invalid_answer_fails_the_turn_naming_prompt_and_field(sa_runtime_factory):
    script = (
        TestScript()
        .add_text_response("Ada, 36")
        .add_text_response('{"name": "Ada", "age": "old"}')
        .add_text_response("never asked")
    )
    provider = TestProvider(script)
    pack = pack_for(PERSON_DICT)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("Ada is 36.")
        messages = (await thread.get_messages()).messages
    assert len(provider.requests) == 2  # one retry, then the turn fails
    first = provider.requests[1].messages[-1]
    assert first.tool_name == RETRY_CALL and "not valid JSON" in (first.content or "")
    failed = messages[-1]
    assert failed.status == "failed"
    error = failed.metadata["error"]
    assert error.startswith("StructuredOutputError: prompt 'extract'")
    assert "age: 'old' is not of type 'integer'" in error
    assert failed.content is None and failed.log_id is not None  # the call's log is kept


def test_error_names_prompt_and_fields():
    error = StructuredOutputError("extract", ["age: Field required", "name: Field required"])
    assert "prompt 'extract'" in str(error) and "age: Field required" in str(error)


def test_strictness_follows_openai_rules():
    assert is_strict(PERSON_DICT)
    assert not is_strict(Person.model_json_schema())
    assert not is_strict({**PERSON_DICT, "required": ["name"]})


@pytest.mark.asyncio
async def test_prompts_without_schema_are_untouched(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("plain"))
    pack = pack_for(None)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("hi")
        message = await last_assistant(thread)
    assert provider.requests[0].tools == [] and provider.requests[0].output_schema is None
    assert message.content == "plain" and "output" not in (message.metadata or {})


@pytest.mark.asyncio
async def test_http_api_returns_output_on_the_message(tmp_path):
    import httpx

    from sa_core import Runtime
    from sa_core.server import create_app
    from sa_core.server.testing import live_server

    script = TestScript().add_tool_call_response(
        [{"name": FINAL_TOOL, "arguments": {"name": "Ada", "age": 36}}]
    )
    runtime = Runtime(
        packs=[pack_for(Person)],
        providers={"test": TestProvider(script)},
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
    )
    async with live_server(create_app(runtime)) as base:
        key, _ = await runtime.store.create_api_key("t")
        thread = await runtime.create_thread("a")
        await thread.send_message("Ada is 36.")
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            page = await http.get(f"{base}/api/packages/s/threads/{thread.thread_id}/messages")
    assert page.status_code == 200, page.text
    messages = page.json()["messages"]
    assert messages[-1]["output"] == {"name": "Ada", "age": 36}
    assert messages[0]["output"] is None  # the user's message


@pytest.mark.asyncio
async def test_http_post_message_takes_a_per_turn_output_schema(tmp_path):
    import httpx

    from sa_core import Runtime
    from sa_core.server import create_app
    from sa_core.server.testing import live_server

    provider = TestProvider(TestScript().add_text_response('{"name": "Ada", "age": 36}'))
    runtime = Runtime(
        packs=[pack_for(None)],
        providers={"test": provider},
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
    )
    async with live_server(create_app(runtime)) as base:
        key, _ = await runtime.store.create_api_key("t")
        thread = await runtime.create_thread("a")
        url = f"{base}/api/packages/s/threads/{thread.thread_id}/messages"
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            posted = await http.post(url, json={"content": "Ada", "output_schema": PERSON_DICT})
            bad = await http.post(url, json={"content": "Ada", "output_schema": "person"})
            wrong = await http.post(url, json={"content": "Ada", "output_schema": {"type": 1}})
            await runtime.wait_idle(timeout=10)
            page = await http.get(url)
    assert posted.status_code == 202, posted.text
    assert bad.status_code == 400
    assert wrong.status_code == 400 and "not a valid JSON Schema" in wrong.text
    assert [t.name for t in provider.requests[0].tools] == [FINAL_TOOL]
    assert page.json()["messages"][-1]["output"] == {"name": "Ada", "age": 36}


@pytest.mark.asyncio
async def test_send_message_output_schema_makes_one_turn_structured(sa_runtime_factory):
    script = (
        TestScript()
        .add_tool_call_response([{"name": FINAL_TOOL, "arguments": {"name": "Ada", "age": 36}}])
        .add_text_response("plain again")
    )
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[pack_for(None)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        sent = await thread.send_message("Ada is 36.", output_schema=Person)
        answer = await last_assistant(thread)
        await thread.send_message("thanks")  # the next turn has no schema
        after = await last_assistant(thread)
    assert sent.metadata == {"output_schema": json_schema_of(Person)}
    assert provider.requests[0].tool_choice == {"name": FINAL_TOOL}
    assert answer.metadata["output"] == {"name": "Ada", "age": 36}
    assert provider.requests[1].tools == [] and after.content == "plain again"


@pytest.mark.asyncio
async def test_queued_message_keeps_its_output_schema(sa_runtime_factory):
    script = (
        TestScript()
        .add_text_response("first", delay=0.3)
        .add_text_response('{"name": "Ada", "age": 36}')
    )
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[pack_for(None)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("one", wait=False)
        queued = await thread.send_message("two", wait=False, output_schema=PERSON_DICT)
        await rt.wait_idle(timeout=10)
        answer = await last_assistant(thread)
    assert queued.metadata == {"output_schema": PERSON_DICT}
    assert [t.name for t in provider.requests[1].tools] == [FINAL_TOOL]
    assert answer.metadata["output"] == {"name": "Ada", "age": 36}


def routed(**queues: list[Any]) -> FunctionProvider:
    """Answers per wire model id, from scripted queues."""

    def answer(request: ProviderRequest) -> Any:
        routed.seen.setdefault(request.model, []).append(request)  # type: ignore[attr-defined]
        return queues[request.model].pop(0)

    routed.seen = {}  # type: ignore[attr-defined]
    return FunctionProvider(answer, name="test")


@pytest.mark.asyncio
async def test_subagent_with_a_schema_returns_its_json_to_the_parent(sa_runtime_factory):
    lead = define_prompt(
        name="lead",
        model="parent",
        prompt="Delegate.",
        include_chat=True,
        tools=[{"name": "extractor", "blocking": True, "initUserMessageProperty": "task"}],
    )
    pack = Pack(
        name="s",
        agents=[
            define_agent(name="boss", side_a={"prompt": "lead"}),
            define_agent(
                name="extractor",
                type="dual_ai",
                expose_as_tool=True,
                tool_description="Extracts a person.",
                side_a={"prompt": "extract"},
                side_b={"prompt": "extract"},
            ),
        ],
        prompts=[lead, define_prompt(name="extract", model="child", output_schema=Person)],
        models=[
            define_model(name="parent", provider="test", model="parent"),
            define_model(name="child", provider="test", model="child"),
        ],
    )
    call = {"tool_calls": [{"name": "extractor", "arguments": {"task": "Ada is 36."}}]}
    final = {"tool_calls": [{"name": FINAL_TOOL, "arguments": {"name": "Ada", "age": 36}}]}
    provider = routed(parent=[call, "Done."], child=[final])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("boss")
        await parent.send_message("Who is it?")
        await parent.refresh()
        page = await parent.get_messages()
    result = next(m for m in page.messages if m.role == "tool")
    assert result.tool_status == "success"
    text, reference = result.content.split("\n\nReference: ")
    assert json.loads(text) == {"name": "Ada", "age": 36}
    assert parent.children[0].status == "terminated"  # non-resumable: done when answered
    assert len(routed.seen["child"]) == 1  # type: ignore[attr-defined]  # no side-B step after it
    assert page.messages[-1].content == "Done."


@pytest.mark.asyncio
async def test_streaming_publishes_the_partial_object(sa_runtime_factory):
    from sa_core.engine.events import OutputFrame

    provider = FunctionProvider(lambda request: '{"name": "Ada", "age": 36}', chunk_size=4)
    provider.supports_structured_output = True  # type: ignore[misc]
    async with sa_runtime_factory(packs=[pack_for(Person)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        async with rt.events.subscribe(thread.thread_id) as frames:
            await thread.send_message("Ada is 36.")
            received = []
            while not frames.empty():
                received.append(frames.get_nowait())
    partials = [f for f in received if f["type"] == "output_chunk"]
    assert all(set(f) == OutputFrame.__required_keys__ for f in partials)
    values = [f["output"] for f in partials]
    assert {"name": "Ada"} in values  # the object grows as it arrives
    assert values[-1] == {"name": "Ada", "age": 36}
    assert len(values) == len({json.dumps(v) for v in values})  # only changes are sent
    answer = next(f for f in reversed(received) if f["type"] == "message_data")
    assert partials[0]["message_id"] == answer["message_id"]


@pytest.mark.asyncio
@pytest.mark.parametrize("valid", [True, False], ids=["valid", "invalid"])
async def test_subprompt_with_a_schema_returns_json_or_an_error_naming_the_field(
    sa_runtime_factory, valid
):
    main = define_prompt(
        name="main", model="parent", prompt="Main.", include_chat=True, tools=["extract"]
    )
    extract = define_prompt(
        name="extract",
        model="child",
        prompt="Extract.",
        tool_description="Extract the person.",
        output_schema=Person,
    )
    pack = Pack(
        name="s",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[main, extract],
        models=[
            define_model(name="parent", provider="test", model="parent"),
            define_model(name="child", provider="test", model="child"),
        ],
    )
    arguments = {"name": "Ada", "age": 36} if valid else {"name": "Ada"}
    provider = routed(
        parent=[{"tool_calls": [{"name": "extract", "arguments": {}}]}, "Done."],
        child=[{"tool_calls": [{"name": FINAL_TOOL, "arguments": arguments}]}],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("Ada is 36.")
        page = await thread.get_messages()
    result = next(m for m in page.messages if m.role == "tool")
    if valid:
        assert result.tool_status == "success"
        assert json.loads(result.content) == {"name": "Ada", "age": 36}
    else:  # one step: no retry inside a subprompt, the problems are the tool's error
        assert result.tool_status == "error"
        assert "prompt 'extract'" in result.content and "age: Field required" in result.content


NESTED = {
    "type": "object",
    "properties": {
        "people": {"type": "array", "items": {"$ref": "#/$defs/person"}, "minItems": 1},
    },
    "required": ["people"],
    "$defs": {
        "person": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["name", "age"],
            "additionalProperties": False,
        }
    },
}


def test_dict_schemas_are_checked_in_full_with_refs_and_bounds():
    from sa_core.spec.schemas import validate_output

    good = {"people": [{"name": "Ada", "age": 36}]}
    assert validate_output(NESTED, good) == (good, [])
    _, problems = validate_output(NESTED, {"people": [{"name": "Ada", "age": -1, "x": 1}]})
    assert problems == [
        "people.0: Additional properties are not allowed ('x' was unexpected)",
        "people.0.age: -1 is less than the minimum of 0",
    ]
    _, problems = validate_output(Person, ["not", "an", "object"])
    assert problems and problems[0].startswith("(root): ")


def test_invalid_schemas_are_refused_where_they_are_given():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not a valid JSON Schema: type"):
        define_prompt(name="p", model="m", output_schema={"type": 12})
    with pytest.raises(ValidationError, match="output_schema must be a pydantic model class"):
        define_prompt(name="p", model="m", output_schema="person")


@pytest.mark.asyncio
async def test_send_message_refuses_an_invalid_schema(sa_runtime_factory):
    provider = TestProvider(TestScript())
    async with sa_runtime_factory(packs=[pack_for(None)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        with pytest.raises(ValueError, match="not a valid JSON Schema"):
            await thread.send_message("hi", output_schema={"type": "nope"})
        with pytest.raises(ValueError, match="pydantic model class or a JSON Schema"):
            await thread.send_message("hi", output_schema=42)  # type: ignore[arg-type]


def test_output_schema_round_trips_through_json_as_output_schema_camel_case():
    from sa_core.spec import PromptDefinition

    dumped = define_prompt(name="p", model="m", output_schema=Person).model_dump(by_alias=True)
    assert dumped["outputSchema"] == json_schema_of(Person)
    loaded = PromptDefinition.model_validate(json.loads(json.dumps(dumped)))
    assert loaded.output_schema == json_schema_of(Person)
    assert define_prompt(name="p", model="m").model_dump(by_alias=True)["outputSchema"] is None
