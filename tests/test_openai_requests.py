"""Checking OpenAI-compatible request bodies: settings under each serving policy, one 400
naming every refused field, history input items, metadata, and the model ids."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.registry import Registry
from sa_core.server.protocols.openai.errors import OpenAIError
from sa_core.server.protocols.openai.models import Model, resolve_model
from sa_core.server.protocols.openai.requests import chat_request
from sa_core.server.protocols.openai.respparse import responses_request
from sa_core.server.protocols.openai.settings import IGNORED_HEADER

PACK = Pack(
    name="desk",
    entry_agents=["triage"],
    agents=[define_agent(name="triage", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="Help.")],
    models=[define_model(name="m", provider="test", model="x")],
)
REGISTRY = Registry([PACK])
MODEL = Model(REGISTRY.scopes["desk"], "triage")
HI = [{"role": "user", "content": "Hi"}]


def chat(policy: Any = "apply", **fields: Any) -> Any:
    return chat_request({"model": "desk/triage", "messages": HI, **fields}, policy, MODEL)


def responses(policy: Any = "apply", **fields: Any) -> Any:
    body = {"model": "desk/triage", "input": "Hi", **fields}
    return responses_request(body, policy, MODEL)


def refusal(call: Any, *args: Any, **fields: Any) -> OpenAIError:
    with pytest.raises(OpenAIError) as caught:
        call(*args, **fields)
    assert caught.value.status == 400
    return caught.value


def test_chat_settings_become_the_turns_model_settings() -> None:
    data = chat(
        temperature=0.2, top_p=0.9, max_completion_tokens=64, seed=7, stop=["END"],
        frequency_penalty=0.5, presence_penalty=-0.5, reasoning_effort="low", verbosity="high",
    )  # fmt: skip
    assert data.settings.applied == {
        "temperature": 0.2, "top_p": 0.9, "max_tokens": 64, "seed": 7, "stop": ["END"],
        "frequency_penalty": 0.5, "presence_penalty": -0.5, "reasoning_effort": "low",
        "verbosity": "high",
    }  # fmt: skip
    assert data.settings.headers() == {}
    assert chat(temperature=None).settings.applied is None  # null is "unset"


def test_responses_settings_include_the_nested_ones() -> None:
    data = responses(
        temperature=1.0, max_output_tokens=10, seed=3,
        reasoning={"effort": "high", "summary": "auto"}, text={"verbosity": "low"},
    )  # fmt: skip
    assert data.settings.applied == {
        "temperature": 1.0, "max_tokens": 10, "seed": 3, "reasoning_effort": "high",
        "verbosity": "low",
    }  # fmt: skip
    assert responses(reasoning={"summary": "auto"}).settings.applied is None


def test_invalid_settings_are_named_each_with_the_clients_field() -> None:
    error = refusal(chat, temperature=5, max_completion_tokens=0, stop=[], reasoning_effort="x")
    assert error.param == "temperature,max_completion_tokens,stop,reasoning_effort"
    assert "The request has 4 problems" in error.message
    assert "Invalid 'temperature': Input should be less than or equal to 2 (got 5)." in (
        error.message
    )
    conflict = refusal(chat, max_tokens=10, max_completion_tokens=20)
    assert conflict.param == "max_completion_tokens"
    assert "conflicts with 'max_tokens'" in conflict.message
    assert chat(max_tokens=10, max_completion_tokens=10).settings.applied == {"max_tokens": 10}


def test_ignore_accepts_and_names_the_settings() -> None:
    data = chat("ignore", temperature=9, seed="not even a number", max_tokens=5)
    assert data.settings.applied is None
    assert data.settings.headers() == {IGNORED_HEADER: "temperature,max_tokens,seed"}
    nested = responses("ignore", reasoning={"effort": "low"}, text={"verbosity": "low"})
    assert nested.settings.headers() == {IGNORED_HEADER: "reasoning.effort,text.verbosity"}


def test_refuse_names_every_setting_and_every_other_refused_field_at_once() -> None:
    error = refusal(
        chat, "refuse", temperature=0.2, max_tokens=5, seed=1, n=2, audio={"voice": "x"}
    )
    for field in ("'temperature', 'max_tokens', 'seed' are not accepted by the model "
                  "'desk/triage'", "'n' is not supported", "'audio' is not supported"):  # fmt: skip
        assert field in error.message
    assert error.param == "audio,n,temperature,max_tokens,seed"
    assert error.code == "unsupported"
    one = refusal(responses, "refuse", max_output_tokens=5)
    assert one.param == "max_output_tokens" and one.message.startswith("'max_output_tokens' is")
    assert chat("refuse").settings.applied is None  # no settings: nothing to refuse


def test_every_bad_message_and_field_is_named_in_one_error() -> None:
    messages = [
        {"role": "tool", "content": "x"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "user", "content": "fine"},
    ]
    error = refusal(
        chat_request, {"messages": messages, "modalities": ["audio"], "stream": "yes"},
        "apply", MODEL,
    )  # fmt: skip
    assert error.param == "modalities,messages[0].tool_call_id,messages[1].content[0],stream"
    single = refusal(chat, n=3)
    assert (single.param, single.code) == ("n", "unsupported")


def test_fields_without_meaning_here_are_accepted() -> None:
    data = chat(
        user="u1", store=True, service_tier="auto", safety_identifier="s", prompt_cache_key="k",
        prompt_cache_retention="24h", parallel_tool_calls=True, logprobs=False, top_logprobs=0,
        stream_options={"include_usage": True, "include_obfuscation": False}, stream=True,
        metadata={"customer": "c-1"}, tools=[], tool_choice="auto", logit_bias={},
    )  # fmt: skip
    assert (data.user, data.metadata, data.include_usage) == ("u1", {"customer": "c-1"}, True)
    assert chat(safety_identifier="s").user == "s"
    answer = responses(
        store=False, include=["reasoning.encrypted_content"], truncation="auto",
        service_tier="flex", metadata={}, background=False, prompt_cache_key="k",
    )  # fmt: skip
    assert answer.metadata is None
    assert refusal(chat, logprobs=True).param == "logprobs"
    assert refusal(chat, metadata={"k": 1}).param == "metadata.k"
    assert refusal(chat, metadata={str(i): "v" for i in range(17)}).param == "metadata"
    assert refusal(responses, background=True).param == "background"


def test_responses_history_items_reduce_to_role_and_text() -> None:
    data = responses(
        instructions="Be brief.",
        input=[
            {"role": "user", "content": "Hi"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
            },
            {"role": "user", "content": [{"type": "input_text", "text": "Again"}]},
        ],
    )  # fmt: skip
    assert data.items == [
        ("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Again"),
    ]  # fmt: skip
    assert data.carries_history
    assert not responses(previous_response_id="resp_x").carries_history
    ended = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes"}]
    error = refusal(responses, input=ended)
    assert "the last input message must be a user's" in error.message
    only = refusal(responses, input=[{"type": "reasoning", "summary": []}])
    assert only.param == "input[0]"
    assert responses(input=[*HI, {"type": "reasoning", "summary": []}]).items == [("user", "Hi")]
    calls = refusal(responses, input=[{"type": "function_call_output", "output": "x"}])
    assert calls.param == "input[0].call_id"  # served: the call it answers must be named
    hosted = refusal(responses, input=[{"type": "computer_call_output", "call_id": "c"}])
    assert hosted.param == "input[0].type"


def test_models_answer_to_package_colon_agent() -> None:
    runtime: Any = SimpleNamespace(registry=REGISTRY)
    assert resolve_model(runtime, "desk:triage") == MODEL
    assert resolve_model(runtime, "desk/triage").name == "desk/triage"
    with pytest.raises(OpenAIError, match="'{package}/{agent}' or '{package}:{agent}'"):
        resolve_model(runtime, "desk:nobody")
