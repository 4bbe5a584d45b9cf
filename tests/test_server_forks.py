"""Forks, rewinds, lineage and the files after a message over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from sa_core import Runtime
from sa_core.server import create_app
from timetravel_kit import Lead, pack

API = "/api/packages/tt/threads"


@pytest.fixture
def client(sa_database_url: str) -> Iterator[TestClient[Any]]:
    lead = Lead()
    runtime = Runtime(
        packs=[pack()],
        providers={"test": lead.provider},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as test_client:
        token, _ = test_client.blocking_portal.call(runtime.store.create_api_key, "tests")
        test_client.headers["Authorization"] = f"Bearer {token}"
        test_client.lead = lead  # type: ignore[attr-defined]
        yield test_client


def send(client: TestClient[Any], thread_id: str, text: str) -> list[dict[str, Any]]:
    """Post a message and wait until the thread's turn settled; the messages after it."""
    assert client.post(f"{API}/{thread_id}/messages", json={"content": text}).status_code == 202
    for _ in range(500):
        body = client.get(f"{API}/{thread_id}").json()
        messages = client.get(f"{API}/{thread_id}/messages", params={"limit": 1000}).json()
        if not body["running"] and messages["messages"][-1]["role"] == "assistant":
            return list(messages["messages"])
        client.blocking_portal.call(_sleep)
    raise AssertionError("the turn did not settle")


async def _sleep() -> None:
    await asyncio.sleep(0.02)


def test_fork_rewind_lineage_and_files_at_over_http(client: TestClient[Any]) -> None:
    thread = client.post(f"{API}/", json={"agent": "lead"}).json()["id"]
    first = send(client, thread, "write /a.txt one")[-1]["id"]
    send(client, thread, "write /a.txt two")

    forked = client.post(f"{API}/{thread}/fork", json={"at": first})
    assert forked.status_code == 201, forked.text
    fork = forked.json()
    assert fork["agent"] == "lead" and fork["id"] != thread
    history = client.get(f"{API}/{fork['id']}/messages").json()["messages"]
    assert history[-1]["id"] == first and len(history) == 4
    assert client.get(f"{API}/{fork['id']}/files/a.txt").content == b"one"

    listed = client.get(f"{API}/{thread}/files", params={"at": first}).json()
    assert [e["path"] for e in listed["entries"]] == ["/a.txt"] and listed["file_count"] == 1
    assert listed["entries"][0]["content_hash"]
    old = client.get(f"{API}/{thread}/files/a.txt", params={"at": first})
    assert old.status_code == 200 and old.content == b"one"

    rewound = client.post(f"{API}/{thread}/rewind", json={"to": first})
    assert rewound.status_code == 200, rewound.text
    assert rewound.json()["kind"] == "rewind" and rewound.json()["data"]["rewound"] == 4
    assert client.get(f"{API}/{thread}/files/a.txt").content == b"one"
    kept = client.get(f"{API}/{thread}/messages", params={"include_rewound": True}).json()
    assert len(kept["messages"]) == 8
    assert kept["messages"][-1]["metadata"]["rewound"]["id"] == rewound.json()["id"]

    lineage = client.get(f"{API}/{thread}/lineage").json()["entries"]
    assert [(e["kind"], e["thread_id"]) for e in lineage] == [("fork", fork["id"]), ("rewind", thread)]


def test_bad_cuts_and_busy_threads_get_clear_errors(client: TestClient[Any]) -> None:
    thread = client.post(f"{API}/", json={"agent": "lead"}).json()["id"]
    call = send(client, thread, "write /a.txt one")[1]
    assert call["tool_calls"]
    bad = client.post(f"{API}/{thread}/fork", json={"at": call["id"]})
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_cut"
    assert "no results yet" in bad.json()["detail"]
    missing = client.post(f"{API}/{thread}/rewind", json={"to": "nope"})
    assert missing.status_code == 422 and "no such message" in missing.json()["detail"]
    assert client.post(f"{API}/{thread}/rewind", json={}).status_code == 400
    unknown = client.get(f"{API}/{thread}/files", params={"at": "nope"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "message_not_found"

    cut = client.get(f"{API}/{thread}/messages").json()["messages"][-1]["id"]
    assert client.post(f"{API}/{thread}/messages", json={"content": "block now"}).status_code == 202
    busy = client.post(f"{API}/{thread}/rewind", json={"to": cut})
    assert busy.status_code == 409 and busy.json()["error"] == "thread_busy"
    client.lead.gate.set()  # type: ignore[attr-defined]
    for _ in range(500):
        if not client.get(f"{API}/{thread}").json()["running"]:
            break
        client.blocking_portal.call(_sleep)
    assert client.post(f"{API}/{thread}/rewind", json={"to": cut}).status_code == 200

    forked = client.post(f"{API}/{thread}/fork", json={}).json()
    shared = client.get(f"{API}/{thread}/messages").json()["messages"][0]["id"]
    gone = client.delete(f"{API}/{thread}")
    assert gone.status_code == 409 and gone.json()["error"] == "shared_history"
    assert forked["id"] in gone.json()["detail"] and shared
