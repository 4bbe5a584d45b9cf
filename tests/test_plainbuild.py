"""PlainBuilder builds the model validation would give, or declines (the caller validates)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from sa_core.spec import Message, ToolCall, ToolCallFunction, ToolResult
from sa_core.spec.plainbuild import PlainBuilder

MESSAGES = PlainBuilder(Message, {"tool_calls": ToolCall})
CALL = ToolCall(id="call_1", function=ToolCallFunction(name="tick", arguments="{}"))


def _same(built: BaseModel, validated: BaseModel) -> None:
    assert built == validated
    assert type(built) is type(validated)
    assert list(built.__dict__.items()) == list(validated.__dict__.items())
    assert [type(v) for v in built.__dict__.values()] == [
        type(v) for v in validated.__dict__.values()
    ]
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_extra == validated.model_extra
    assert built.model_dump_json() == validated.model_dump_json()


@pytest.mark.parametrize(
    "values",
    [
        {"id": "m1", "role": "assistant", "status": "pending", "depth": 0, "prompt": "p"},
        {"id": "m2", "role": "tool", "content": "ok", "tool_status": "error", "silent": True},
        {"id": "m3", "role": "assistant", "tool_calls": [CALL], "created_at": 5},
        {"id": "m4", "role": "user", "metadata": None, "subagent_blocking": False},
    ],
)
def test_a_message_of_plain_values_is_the_one_validation_gives(values: dict[str, Any]) -> None:
    built = MESSAGES.build(dict(values))
    assert built is not None
    _same(built, Message.model_validate(values))


def test_the_tool_calls_are_kept_in_a_list_of_their_own_as_validation_keeps_them() -> None:
    calls = [CALL]
    built = MESSAGES.build({"id": "m", "role": "assistant", "tool_calls": calls})
    assert built is not None and built.tool_calls is not None
    assert built.tool_calls is not calls and built.tool_calls[0] is CALL


@pytest.mark.parametrize(
    "values",
    [
        {"id": "m", "role": "robot"},  # not an allowed literal
        {"id": "m", "role": "user", "created_at": True},  # a bool for an int
        {"id": "m", "role": "user", "silent": 1},  # an int for a bool
        {"id": "m", "role": "user", "metadata": {"a": 1}},  # a dict (validation copies it)
        {"id": "m", "role": "user", "tool_calls": [CALL.model_dump()]},  # not models
        {"id": "m", "role": "user", "extra_field": 1},  # an extra
        {"role": "user"},  # a required field missing
    ],
)
def test_values_that_need_validation_are_declined(values: dict[str, Any]) -> None:
    assert MESSAGES.build(values) is None


def test_a_nested_model_instance_is_kept_as_validation_keeps_it() -> None:
    function = ToolCallFunction(name="tick", arguments="{}")
    values = {"id": "c", "function": function, "extra_content": None}
    built = PlainBuilder(ToolCall).build(values)
    assert built is not None and built.function is function
    _same(built, ToolCall(**values))


def test_a_model_with_validators_is_refused() -> None:
    class Checked(BaseModel):
        name: str

        @field_validator("name")
        @classmethod
        def _upper(cls, value: str) -> str:
            return value.upper()

    with pytest.raises(TypeError, match="validators"):
        PlainBuilder(Checked)


@pytest.mark.parametrize(
    "changes",
    [
        {"content": "done", "status": "completed", "response_completed_at": 7, "log_id": "l"},
        {"content": None, "tool_calls": [CALL], "reasoning_content": None, "status": "completed"},
    ],
)
def test_an_update_is_the_message_validation_of_the_merged_values_gives(
    changes: dict[str, Any],
) -> None:
    pending = Message(id="m", thread_id="t", role="assistant", status="pending", prompt="p")
    updated = MESSAGES.updated(pending, dict(changes))
    assert updated is not None
    _same(updated, Message.model_validate({**pending.__dict__, **changes}))


@pytest.mark.parametrize(
    ("pending", "changes"),
    [
        (Message(id="m", role="assistant", metadata={"a": 1}), {"content": "x"}),
        (Message(id="m", role="assistant", extra_field=1), {"content": "x"}),
        (Message(id="m", role="assistant"), {"status": "unknown"}),
        (Message(id="m", role="assistant"), {"reasoning_details": [{"a": 1}]}),
    ],
)
def test_an_update_that_needs_validation_is_declined(
    pending: Message, changes: dict[str, Any]
) -> None:
    assert MESSAGES.updated(pending, changes) is None


def test_a_default_factory_makes_a_new_default_per_model_as_validation_does() -> None:
    results = PlainBuilder(ToolResult)
    first = results.build({"status": "success", "result": "ok"})
    second = results.build({"status": "success", "result": "ok"})
    assert first is not None and second is not None
    _same(first, ToolResult(status="success", result="ok"))
    assert first.attachments == [] and first.attachments is not second.attachments


def test_an_update_of_a_model_holding_a_list_is_declined() -> None:
    result = ToolResult(status="success", result="ok")  # attachments: a list, copied
    assert PlainBuilder(ToolResult).updated(result, {"result": "changed"}) is None
