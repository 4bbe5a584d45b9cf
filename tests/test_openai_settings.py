"""Client settings, conversations sent as history and ``{package}:{agent}`` model ids, through
the official ``openai`` client on a live ``sa serve``.

The server hosts the ``openai_kit`` test plugin: its model answers with the settings its
request carried (see ``tests/openai_kit/sa_openai_kit.py``), so each answer shows what reached
the provider for that turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from openai_serve import Served

KIT = Path(__file__).parent / "openai_kit"
PACKAGE = "settings_kit"
OWN = {"temperature": None, "max_tokens": 100, "seed": None, "top_p": None, "stop": None,
       "options_temperature": 0.3}  # fmt: skip
"""What the model receives without client settings: the prompt's own values."""
ASKED = {**OWN, "temperature": 0.9, "max_tokens": 50, "seed": 7, "options_temperature": None}
"""What it receives for temperature=0.9, max_tokens=50, seed=7."""


CLIENTS: dict[int, openai.OpenAI] = {}


@contextmanager
def serve(tmp: Path, *extra: str) -> Iterator[Served]:
    """A live server with the kit (and one client of it, closed with it)."""
    database = f"sqlite:///{tmp / 'sa.db'}"
    server = Served(tmp, database, *extra, test_provider=False, pythonpath=[KIT]).start()
    try:
        yield server
    finally:
        if (sdk := CLIENTS.pop(id(server), None)) is not None:
            sdk.close()
        server.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("kit")) as server:
        yield server


def client(server: Served) -> openai.OpenAI:
    if id(server) not in CLIENTS:
        CLIENTS[id(server)] = openai.OpenAI(
            base_url=server.base_url, api_key=server.key, max_retries=0, timeout=60
        )
    return CLIENTS[id(server)]


def chat(server: Served, agent: str, text: str = "Hi", **fields: Any) -> Any:
    messages: Any = [{"role": "user", "content": text}]
    return client(server).chat.completions.with_raw_response.create(
        model=f"{PACKAGE}/{agent}", messages=messages, **fields
    )


def seen(raw: Any) -> Any:
    """The settings the model reported, from a raw chat or responses answer."""
    answer = raw.parse()
    if hasattr(answer, "output_text"):
        return json.loads(answer.output_text)
    return json.loads(answer.choices[0].message.content)


def test_settings_reach_the_provider_request_of_that_turn(served: Served) -> None:
    sdk = client(served)
    first = chat(served, "echo", temperature=0.9, max_tokens=50, seed=7)
    assert seen(first) == ASKED and "x-sa-ignored-fields" not in first.headers
    again = sdk.chat.completions.with_raw_response.create(
        model=f"{PACKAGE}/echo",
        messages=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": json.dumps(ASKED, sort_keys=True)},
            {"role": "user", "content": "And now?"},
        ],
    )
    assert again.headers["x-sa-thread-id"] == first.headers["x-sa-thread-id"]
    assert seen(again) == OWN  # the next turn, without settings, has the prompt's own
    answered = sdk.responses.with_raw_response.create(
        model=f"{PACKAGE}/echo",
        input="Hi",
        temperature=0.9,
        max_output_tokens=50,
        extra_body={"seed": 7},
    )
    assert seen(answered) == ASKED
    follow = sdk.responses.create(
        model=f"{PACKAGE}/echo", input="More", previous_response_id=answered.parse().id
    )
    assert json.loads(follow.output_text) == OWN
    with sdk.chat.completions.stream(
        model=f"{PACKAGE}/echo", messages=[{"role": "user", "content": "Hi"}], top_p=0.5
    ) as stream:
        streamed = stream.get_final_completion().choices[0].message.content
    assert json.loads(streamed or "") == {**OWN, "top_p": 0.5}


def test_ignore_names_the_fields_and_keeps_the_prompts_values(served: Served) -> None:
    ignored = chat(served, "ignoring", temperature=0.9, max_tokens=50, seed=7)
    assert ignored.headers["x-sa-ignored-fields"] == "temperature,max_tokens,seed"
    assert seen(ignored) == OWN
    answered = client(served).responses.with_raw_response.create(
        model=f"{PACKAGE}/ignoring",
        input="Hi",
        temperature=0.9,
        max_output_tokens=50,
        extra_body={"seed": 7},
    )
    assert answered.headers["x-sa-ignored-fields"] == "temperature,max_output_tokens,seed"
    assert seen(answered) == OWN


def test_refuse_lists_every_refused_field_in_one_400(served: Served) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        chat(served, "refusing", temperature=0.9, max_tokens=50, seed=7, n=2)
    message = str(refused.value)
    assert "'temperature', 'max_tokens', 'seed' are not accepted by the model " in message
    assert "'settings_kit/refusing'" in message and "'n' is not supported" in message
    assert refused.value.param == "n,temperature,max_tokens,seed"
    with pytest.raises(openai.BadRequestError) as responses:
        client(served).responses.create(
            model=f"{PACKAGE}/refusing", input="Hi", temperature=0.9, max_output_tokens=50,
            reasoning={"effort": "low"},
        )  # fmt: skip
    assert responses.value.param == "temperature,max_output_tokens,reasoning.effort"
    assert seen(chat(served, "refusing")) == OWN  # without settings it answers


def test_the_agents_own_policy_wins_over_the_servers(tmp_path: Path) -> None:
    with serve(tmp_path, "--client-settings", "refuse") as server:
        with pytest.raises(openai.BadRequestError, match="'temperature' is not accepted"):
            chat(server, "echo", temperature=0.9)
        assert seen(chat(server, "echo")) == OWN
        assert seen(chat(server, "applying", temperature=0.9))["temperature"] == 0.9
        ignored = chat(server, "ignoring", temperature=0.9)
        assert ignored.headers["x-sa-ignored-fields"] == "temperature"


def history_of(response: Any) -> list[Any]:
    """The output items of a response as a client sends them back (``to_input_list()``)."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def test_a_responses_conversation_sent_as_history_is_one_thread(served: Served) -> None:
    sdk = client(served)
    model = f"{PACKAGE}:echo"
    said: list[Any] = [{"role": "user", "content": '/tool remember_color {"color": "teal"}'}]
    first = sdk.responses.with_raw_response.create(
        model=model, instructions="Be brief.", input=said
    )
    thread_id = first.headers["x-sa-thread-id"]
    assert first.parse().output_text == "remember_color returned: saved"
    said += [
        *history_of(first.parse()),
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": "How are you set?"},
    ]
    second = sdk.responses.with_raw_response.create(
        model=model, instructions="Be brief.", input=said
    )
    assert second.headers["x-sa-thread-id"] == thread_id
    said += [*history_of(second.parse()), {"role": "user", "content": "/tool recall_color {}"}]
    with sdk.responses.with_streaming_response.create(
        model=model, instructions="Be brief.", input=said, stream=True
    ) as third:
        assert third.headers["x-sa-thread-id"] == thread_id
        events = list(third.parse())
    assert events[-1].response.output_text == "recall_color returned: teal"  # type: ignore[union-attr]
    said += [*history_of(events[-1].response), {"role": "user", "content": "/tool recall_color {}"}]  # type: ignore[union-attr]
    fourth = sdk.responses.with_raw_response.create(
        model=model, instructions="Be brief.", input=said
    )
    assert fourth.headers["x-sa-thread-id"] == thread_id  # a streamed turn is indexed too
    branched = sdk.responses.with_raw_response.create(
        model=model, instructions="Be brief.", input=[*said[:2], {"role": "user", "content": "?"}]
    )
    assert branched.headers["x-sa-thread-id"] != thread_id  # the thread moved on


def test_a_conversation_started_on_chat_continues_on_responses(served: Served) -> None:
    sdk = client(served)
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": '/tool remember_color {"color": "plum"}'},
    ]
    first = sdk.chat.completions.with_raw_response.create(
        model=f"{PACKAGE}/echo", messages=messages, metadata={"customer": "c-7"}
    )
    text = first.parse().choices[0].message.content
    history: Any = [
        messages[1],
        {"role": "assistant", "content": [{"type": "output_text", "text": text}]},
        {"role": "user", "content": "/tool recall_metadata {}"},
    ]
    answered = sdk.responses.with_raw_response.create(
        model=f"{PACKAGE}:echo", instructions="Be brief.", input=history
    )
    assert answered.headers["x-sa-thread-id"] == first.headers["x-sa-thread-id"]
    assert answered.parse().output_text == 'recall_metadata returned: {"customer": "c-7"}'


def test_package_colon_agent_is_a_model_id(served: Served) -> None:
    sdk = client(served)
    assert f"{PACKAGE}/echo" in [m.id for m in sdk.models.list()]
    assert all(":" not in m.id for m in sdk.models.list())
    assert sdk.models.retrieve(f"{PACKAGE}:echo").id == f"{PACKAGE}:echo"
    reply = sdk.chat.completions.create(
        model=f"{PACKAGE}:echo", messages=[{"role": "user", "content": "Hi"}], seed=3
    )
    assert json.loads(reply.choices[0].message.content or "")["seed"] == 3
    assert json.loads(sdk.responses.create(model=f"{PACKAGE}:echo", input="Hi").output_text) == OWN
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        sdk.models.retrieve(f"{PACKAGE}:nobody")
