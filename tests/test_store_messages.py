"""Messages in the store: every field round-trips, ordering, filters, updates, the history index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from store_kit import make_thread, msg, store_on_each_backend

from sa_core.spec.records import (
    AttachmentRef,
    Log,
    Message,
    ToolCall,
    ToolCallFunction,
)
from sa_core.store import (
    Store,
    now_us,
    open_store,
)

store = store_on_each_backend()


# --- messages ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_message_round_trip_every_field(store: Store) -> None:
    await make_thread(store)
    full = Message(
        id="m1",
        thread_id="t1",
        role="assistant",
        content="hi",
        name="bot",
        tool_calls=[
            ToolCall(
                id="c1",
                function=ToolCallFunction(name="f", arguments='{"a": 1}'),
                extra_content={"google": {"thought_signature": "sig"}},
            )
        ],
        tool_call_id="tc",
        log_id="l1",
        created_at=now_us(),
        request_sent_at=1,
        response_completed_at=2,
        status="completed",
        silent=True,
        tool_status="success",
        reasoning_content="because",
        reasoning_details=[{"type": "reasoning.text", "text": "x"}],
        parent_id="p",
        depth=0,
        prompt="main",
        attachments=[
            AttachmentRef(id="f1", path="/attachments/a.png", name="a.png", size=3, width=1)
        ],
        metadata={"k": [1, {"n": None}]},
        subagent_id="s",
        subagent_name="sn",
        subagent_title="st",
        subagent_description="sd",
        subagent_status="running",
        subagent_resumable=True,
        subagent_blocking=False,
        subagent_thread_name="tn",
        subagent_spawn_group_id="g",
        custom_extra={"kept": True},
    )
    await store.insert_messages([full])
    got = await store.get_message("t1", "m1")
    assert got == full
    assert got is not None and got.model_extra == {"custom_extra": {"kept": True}}
    assert got.tool_calls is not None and got.tool_calls[0].arguments == {"a": 1}
    assert await store.get_message("other", "m1") is None


@pytest.mark.asyncio
async def test_messages_read_back_as_validating_them_would_build_them(store: Store) -> None:
    """Rows without nested models skip validation: the messages must not differ in any way.

    Same fields in the same order, same Python types (booleans, integers, decoded JSON), same
    fields set and extras, as ``Message.model_validate`` builds them, for every kind of row.
    """
    from sa_core.store import messagerows

    # the table's columns follow the message's fields: a read row is then its __dict__
    assert messagerows.IN_FIELD_ORDER
    await make_thread(store)
    shapes: list[dict[str, Any]] = [
        {},
        {
            "role": "assistant",
            "status": "completed",
            "log_id": "l",
            "request_sent_at": 5,
            "response_completed_at": 6,
            "prompt": "main",
        },
        {"silent": True, "metadata": {"k": [1, {"n": None}], "flag": False}},
        {"role": "tool", "tool_call_id": "c", "name": "f", "tool_status": "error"},
        {"role": "assistant", "reasoning_content": "r", "reasoning_details": [{"t": "x"}]},
        {
            "subagent_id": "s",
            "subagent_status": "running",
            "subagent_resumable": False,
            "subagent_blocking": True,
            "subagent_spawn_group_id": "g",
            "subagent_title": None,
        },
        {"depth": 1, "parent_id": "p", "content": None},
        {"tool_calls": [ToolCall(id="c", function=ToolCallFunction(name="f", arguments="{}"))]},
        {"attachments": [AttachmentRef(id="f", path="/a.txt", name="a.txt", size=1)]},
        {"custom_extra": {"kept": True}},
    ]
    written = [msg(f"m{i}", created_at=now_us(), **shape) for i, shape in enumerate(shapes)]
    await store.insert_messages(written)
    page, _total = await store.list_messages("t1", include_silent=True, max_depth=None)
    read = [*page, *await store.history("t1")]
    assert {m.id for m in read} == {m.id for m in written}
    for message in read:
        built = Message.model_validate(message.model_dump())
        assert list(message.__dict__.items()) == list(built.__dict__.items())
        assert [type(v) for v in message.__dict__.values()] == [
            type(v) for v in built.__dict__.values()
        ]
        assert message.model_fields_set == built.model_fields_set
        assert message.model_extra == built.model_extra
        original = next(m for m in written if m.id == message.id)
        assert message.model_dump_json() == original.model_dump_json()


@pytest.mark.asyncio
async def test_messages_with_none_fields_round_trip(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message's ``None`` fields are written as NULL in the statement: rows read back equal.

    Covers a shape per message, shapes beyond the cache's bound, and a multi-row insert.
    """
    from sa_core.store import messages as store_messages

    monkeypatch.setattr(store_messages._ShapedInsert, "MAX_SHAPES", 2)
    await make_thread(store)
    optional = ["name", "tool_call_id", "log_id", "status", "prompt", "metadata", "parent_id"]
    values: dict[str, Any] = {
        "name": "n",
        "tool_call_id": "tc",
        "log_id": "l",
        "status": "completed",
        "prompt": "p",
        "metadata": {"k": None},
        "parent_id": "x",
    }
    singles = [
        msg(f"m{i}", created_at=now_us(), **{key: values[key] for key in optional[:i]})
        for i in range(len(optional) + 1)
    ]
    for message in singles:
        await store.insert_messages([message])
    several = [msg("r1", created_at=now_us(), name="n"), msg("r2", created_at=now_us())]
    await store.insert_messages(several)
    for message in [*singles, *several]:
        assert await store.get_message("t1", message.id) == message
    log = Log(id="l1", type="llm_call", data={"a": None}, created_at=now_us())
    await store.insert_log("t1", log)
    assert (await store.list_logs("t1"))[0] == [log]


@pytest.mark.asyncio
async def test_message_ordering_and_filters(store: Store) -> None:
    await make_thread(store)
    same = now_us()
    await store.insert_messages(
        [
            msg("a", created_at=same),
            msg("b", created_at=same, role="assistant", status="pending"),
            msg("c", created_at=same, silent=True),
            msg("d", depth=1, parent_id="b", role="tool"),
            msg("e", status="failed"),
        ]
    )
    await store.insert_messages([msg("f")])

    def ids(messages: list[Message]) -> list[str]:
        return [m.id for m in messages]

    page, total = await store.list_messages("t1")
    assert ids(page) == ["a", "b", "e", "f"] and total == 4
    page, total = await store.list_messages("t1", include_silent=True, max_depth=None)
    assert ids(page) == ["a", "b", "c", "d", "e", "f"] and total == 6
    page, total = await store.list_messages("t1", order="desc", limit=2)
    assert ids(page) == ["f", "e"] and total == 4
    page, total = await store.list_messages("t1", order="desc", limit=2, offset=2)
    assert ids(page) == ["b", "a"]
    page, total = await store.list_messages("t1", statuses_excluded=("pending", "failed"))
    assert ids(page) == ["a", "f"] and total == 2
    page, _ = await store.list_messages("t1", parent_id="b", max_depth=None)
    assert ids(page) == ["d"]
    page, _ = await store.list_messages("t1", parent_id=None, include_silent=True)
    assert ids(page) == ["a", "b", "c", "e", "f"]

    assert ids(await store.history("t1")) == ["a", "c", "e", "f"]
    e = await store.get_message("t1", "e")
    assert e is not None
    assert ids(await store.history("t1", since=e.created_at)) == ["f"]
    assert ids(await store.messages_by_parent("t1", "b")) == ["d"]

    assert await store.delete_message("t1", "f")
    assert not await store.delete_message("t1", "f")
    assert ids(await store.history("t1")) == ["a", "c", "e"]


@pytest.mark.asyncio
async def test_update_message(store: Store) -> None:
    await make_thread(store)
    await store.insert_messages([msg("m1", role="assistant", status="pending")])
    call = ToolCall(id="c", function=ToolCallFunction(name="t"))
    updated = await store.update_message(
        "m1", {"status": "completed", "tool_calls": [call], "metadata": {"n": 1}, "content": None}
    )
    assert updated is not None
    assert updated.status == "completed" and updated.tool_calls == [call]
    assert updated.metadata == {"n": 1} and updated.content is None
    assert await store.get_message("t1", "m1") == updated
    assert await store.update_message("missing", {"status": "failed"}) is None
    same = await store.update_message("m1", {})
    assert same == updated
    with pytest.raises(ValueError, match="unknown"):
        await store.update_message("m1", {"nope": 1})


@pytest.mark.asyncio
async def test_insert_message_requires_thread_id(store: Store) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        await store.insert_messages([Message(id="x", role="user")])


@pytest.mark.asyncio
async def test_history_uses_index(tmp_path: Path) -> None:
    from sa_core.store.messages import _HISTORY

    async with await open_store(f"sqlite:///{tmp_path}/sa.db") as store:

        def plan(conn: Any) -> str:
            compiled = _HISTORY.stmt.compile(dialect=conn.dialect)  # type: ignore[attr-defined]
            sql = "EXPLAIN QUERY PLAN " + compiled.string
            args = ["t1", 0, -1, "pending"]
            rows = conn.exec_driver_sql(sql, tuple(args)).all()
            return " | ".join(str(row[-1]) for row in rows)

        text_plan = await store._read(plan)
        # the thread's rows in (created_at, seq) order, read from the index: no sort
        assert "ix_messages_thread_created (thread_id=? AND created_at>?)" in text_plan
        assert "TEMP B-TREE" not in text_plan


def test_message_rows_match_the_models_json_dump() -> None:
    """``message_to_row`` dumps only the JSON fields; the parameters equal a full JSON dump's."""
    from sa_core.store.messagerows import _PARAMS, message_to_row
    from sa_core.store.messagerows import STORED_FIELDS as _STORED

    def dumped_row(message: Message) -> dict[str, Any]:
        dumped = message.model_dump(mode="json")
        row = {param: dumped[key] for key, param in _PARAMS}
        row["p_extra"] = {k: v for k, v in dumped.items() if k not in _STORED} or None
        return row

    call = ToolCall(
        id="c1",
        function=ToolCallFunction(name="f", arguments='{"a": 1}'),
        extra_content={"google": {"thought_signature": "sig"}},
    )
    messages = [
        msg("a", role="assistant", content=None, tool_calls=[call], status="completed"),
        msg("t", role="tool", name="f", tool_call_id="c1", tool_status="success", depth=1),
        msg(
            "u",
            attachments=[AttachmentRef(path="/attachments/a.png", name="a.png", width=2)],
            metadata={"k": [1, {"n": None}]},
            reasoning_details=[{"type": "reasoning.text", "text": "x"}],
            silent=True,
        ),
        msg("x", custom_extra={"kept": True}),
    ]
    for message in messages:
        assert message_to_row(message) == dumped_row(message)
