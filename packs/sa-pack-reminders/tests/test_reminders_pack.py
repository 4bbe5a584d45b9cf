"""The reminders pack: scheduled effects that survive restarts, and the reminders endpoint."""

from __future__ import annotations

import asyncio
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from sa_pack_reminders import EFFECT, pack, reminders_endpoint

from sa_core.cli import main as sa_main
from sa_core.packloader import load_packs_from
from sa_core.testing import TestProvider, TestScript

PACK_DIR = Path(__file__).resolve().parents[1]
GET = SimpleNamespace(method="GET", path="reminders", params={}, query={}, headers={}, body=b"")

# minutes small enough for a test: 0.002 min = 120 ms, 0.005 min = 300 ms
SOON = 0.002
LATER = 0.005


def model(script: TestScript) -> dict[str, TestProvider]:
    return {"openai": TestProvider(script, name="openai")}


async def reminders_delivered(thread) -> list[str]:
    page = await thread.get_messages()
    return [m.content for m in page.messages if (m.metadata or {}).get("kind") == "reminder"]


@pytest.mark.asyncio
async def test_reminder_set_by_the_model_fires_after_its_delay(sa_runtime_factory) -> None:
    script = (
        TestScript()
        .add_tool_call_response(
            [{"name": "set_reminder", "arguments": {"text": "stretch", "minutes": SOON}}]
        )
        .add_text_response("I will remind you to stretch.")
    )
    async with sa_runtime_factory(packs=[pack], providers=model(script)) as rt:
        thread = await rt.create_thread("reminder_assistant")
        async with rt.events.subscribe(thread.thread_id) as frames:
            await thread.send_message("Remind me to stretch in a moment.")
            tool_row = next(m for m in (await thread.get_messages()).messages if m.role == "tool")
            assert re.fullmatch(r"Reminder \S+ set for \S+: stretch", tool_row.content)
            assert await reminders_delivered(thread) == []  # not yet due
            await asyncio.sleep(SOON * 60 + 0.1)
            await rt.wait_idle(timeout=5)
            events = []
            while not frames.empty():
                events.append(frames.get_nowait())
        delivered = await reminders_delivered(thread)
        assert await thread.get_scheduled_effects(EFFECT) == []
        page = await thread.get_messages()
    assert delivered == ["Reminder: stretch"]
    assert (
        page.messages[-1].role == "assistant" and page.messages[-1].content == "Reminder: stretch"
    )
    reminder_events = [e for e in events if e.get("eventType") == "reminder"]
    assert [e["data"]["text"] for e in reminder_events] == ["stretch"]


@pytest.mark.asyncio
async def test_pending_reminder_survives_a_runtime_restart(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("reminder_assistant")
        result = await thread.invoke_tool("set_reminder", {"text": "call mum", "minutes": LATER})
        assert result.status == "success"
        thread_id = thread.thread_id
    # the process is gone before the reminder is due; a new one starts on the same database
    async with sa_runtime_factory(packs=[pack]) as rt:
        again = await rt.get_thread(thread_id)
        assert [r["text"] for r in (await reminders_endpoint(GET, again))["reminders"]] == [
            "call mum"
        ]
        await asyncio.sleep(LATER * 60 + 0.1)
        await rt.wait_idle(timeout=5)
        assert await reminders_delivered(again) == ["Reminder: call mum"]
        assert (await reminders_endpoint(GET, again))["reminders"] == []


@pytest.mark.asyncio
async def test_endpoint_lists_pending_reminders_soonest_first(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("reminder_assistant")
        assert await reminders_endpoint(GET, thread) == {
            "thread_id": thread.thread_id,
            "reminders": [],
        }
        await thread.invoke_tool("set_reminder", {"text": "water plants", "minutes": 120})
        await thread.invoke_tool("set_reminder", {"text": "standup", "minutes": 15})
        body = await reminders_endpoint(GET, thread)
        listed = await thread.invoke_tool("list_reminders", {})
        first_id = body["reminders"][0]["id"]
        cancelled = await thread.invoke_tool("cancel_reminder", {"reminder_id": first_id})
        again = await thread.invoke_tool("cancel_reminder", {"reminder_id": first_id})
        after = await reminders_endpoint(GET, thread)
    assert body["thread_id"] == thread.thread_id
    assert [r["text"] for r in body["reminders"]] == ["standup", "water plants"]
    assert all(set(r) == {"id", "text", "due_at"} for r in body["reminders"])
    assert body["reminders"][0]["due_at"] < body["reminders"][1]["due_at"]
    assert listed.result.splitlines()[0].startswith(f"{first_id}  ")
    assert cancelled.result == f"Reminder {first_id} cancelled."
    assert again.status == "error" and "No pending reminder" in again.error
    assert [r["text"] for r in after["reminders"]] == ["water plants"]


@pytest.mark.asyncio
async def test_invalid_delays_are_refused(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("reminder_assistant")
        negative = await thread.invoke_tool("set_reminder", {"text": "x", "minutes": -1})
        too_far = await thread.invoke_tool("set_reminder", {"text": "x", "minutes": 10**7})
        assert await thread.get_scheduled_effects() == []
    assert negative.status == too_far.status == "error"
    assert negative.error_code == "invalid_arguments"


def test_pack_declares_its_effect_endpoint_and_entry_point(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pack.validate()
    assert pack.warnings() == []
    assert [e.name for e in pack.effects] == ["remind"]
    endpoint = pack.endpoints[0]
    assert (endpoint.path, endpoint.method, endpoint.handler) == (
        "reminders",
        "GET",
        reminders_endpoint,
    )
    assert pack.agents[0].package_name == "sa-pack-reminders"
    project = tomllib.loads((PACK_DIR / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["sa.packs"] == {"reminders": "sa_pack_reminders:pack"}
    assert [p.name for p in load_packs_from(str(PACK_DIR))] == ["reminders"]
    assert sa_main(["validate", str(PACK_DIR)]) == 0
    assert "1 effect, 1 endpoint" in capsys.readouterr().out
