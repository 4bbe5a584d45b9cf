"""Time travel over HTTP: export from a server (SQLite, PostgreSQL), import and replay elsewhere.

``test_server_*`` runs on both backends: the recording server's store is the parametrised one;
the server it is imported into is always a fresh SQLite one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from replay_desk import desk_model, desk_pack, no_model, run_desk

from sa_core import Runtime
from sa_core.server import create_app
from sa_core.server.testing import live_server

BASE = "/api/packages/desk/threads"


@pytest.mark.asyncio
async def test_a_tree_exported_over_http_replays_identically_on_a_fresh_sqlite_server(
    sa_database_url: str, tmp_path: Path
) -> None:
    executed: list[str] = []
    recording = Runtime(
        packs=[desk_pack(executed)],
        providers={"test": desk_model()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    async with live_server(create_app(recording)) as base:
        key, _ = await recording.store.create_api_key("t")
        lead = await run_desk(recording)
        async with httpx.AsyncClient(base_url=base, headers=_bearer(key)) as http:
            exported = await http.get(f"{BASE}/{lead.thread_id}/export")
    assert exported.status_code == 200, exported.text
    document = exported.json()
    assert document["format"] == "sa-thread/1"

    replayed: list[str] = []
    fresh = Runtime(
        packs=[desk_pack(replayed)],
        providers={"test": no_model()},
        database_url=f"sqlite:///{tmp_path / 'fresh.db'}",
        load_entrypoints=False,
    )
    async with live_server(create_app(fresh)) as base:
        key, _ = await fresh.store.create_api_key("t")
        async with httpx.AsyncClient(base_url=base, headers=_bearer(key), timeout=120) as http:
            imported = await http.post(f"{BASE}/import", json=document)
            assert imported.status_code == 201, imported.text
            thread_id = imported.json()["id"]
            replay = await http.post(f"{BASE}/{thread_id}/replay", json={"tools": "recorded"})
        provider_calls = fresh.providers["test"].call_count
    assert replay.status_code == 200, replay.text
    report = replay.json()
    assert report["identical"] is True, report
    assert report["divergence"] is None
    assert (report["model_calls"], report["tool_executions"], provider_calls) == (10, 0, 0)
    assert replayed == []


@pytest.mark.asyncio
async def test_import_refuses_a_bad_document_with_every_problem(tmp_path: Path) -> None:
    runtime = Runtime(
        packs=[desk_pack([])],
        providers={"test": no_model()},
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
    )
    node = {"id": "x", "path": "root", "package": "desk", "agent_id": "lead", "children": [
        {"id": "y", "path": "root/ghost#1", "package": "desk", "agent_id": "ghost"},
    ]}  # fmt: skip
    async with live_server(create_app(runtime)) as base:
        key, _ = await runtime.store.create_api_key("t")
        async with httpx.AsyncClient(base_url=base, headers=_bearer(key)) as http:
            wrong = await http.post(f"{BASE}/import", json={"format": "zip"})
            ghost = await http.post(
                f"{BASE}/import", json={"format": "sa-thread/1", "thread": node}
            )
            elsewhere = await http.post(
                f"{BASE}/import",
                json={"format": "sa-thread/1", "thread": {**node, "package": "other"}},
            )
            missing = await http.get(f"{BASE}/nope/export")
    assert (wrong.status_code, wrong.json()["error"]) == (422, "thread_document")
    assert "sa-thread/1" in wrong.json()["detail"]
    assert ghost.status_code == 422
    assert "agent 'ghost' of package 'desk'" in ghost.json()["detail"]
    assert "root/ghost#1" in ghost.json()["detail"]
    assert elsewhere.status_code == 422 and "/api/packages/other/" in elsewhere.json()["detail"]
    assert missing.status_code == 404


def _bearer(key: str) -> dict[str, Any]:
    return {"Authorization": f"Bearer {key}"}
