"""``sa thread export|import``, ``sa replay`` and ``sa_core.testing.replay_export``: an incident
kept as a file, replayed from the command line and inside a test."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from replay_desk import desk_model, desk_pack, run_desk
from serve_process import ServeProcess

from sa_core import Runtime
from sa_core.cli import main
from sa_core.testing import assert_identical, replay_export

PACK_FILE = """
from replay_desk import desk_pack

pack = desk_pack([], lead_prompt={prompt!r})
"""


def record_incident(database: Path) -> str:
    """Run the desk on a SQLite file (the 'production' database); the lead's id."""

    async def record() -> str:
        runtime = Runtime(
            packs=[desk_pack([])],
            providers={"test": desk_model()},
            database_url=f"sqlite:///{database}",
            load_entrypoints=False,
        )
        async with runtime:
            return str((await run_desk(runtime)).thread_id)

    return asyncio.run(record())


def pack_file(tmp_path: Path, prompt: str = "You run the research desk.") -> str:
    path = tmp_path / f"desk_{abs(hash(prompt))}.py"
    path.write_text(PACK_FILE.format(prompt=prompt))
    return str(path)


def test_export_import_and_replay_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    production = tmp_path / "production.db"
    lead_id = record_incident(production)
    incident = tmp_path / "incident.json"
    desk = pack_file(tmp_path)
    db = ["--db", f"sqlite:///{production}", "--pack", desk]
    assert main(["thread", "export", lead_id, "-o", str(incident), *db]) == 0
    assert f"Exported thread {lead_id} (3 threads)" in capsys.readouterr().out
    assert json.loads(incident.read_text())["format"] == "sa-thread/1"

    laptop = ["--db", f"sqlite:///{tmp_path / 'laptop.db'}", "--pack", desk]
    assert main(["thread", "import", str(incident), *laptop]) == 0
    imported = capsys.readouterr().out.strip()
    assert imported and imported != lead_id

    assert main(["replay", str(incident), *laptop]) == 0  # the file
    assert "Identical" in capsys.readouterr().out
    assert main(["replay", imported, *laptop]) == 0  # an id of the database
    assert "10 model answers served" in capsys.readouterr().out


def test_replay_exits_1_and_prints_the_divergence_when_the_code_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    production = tmp_path / "production.db"
    lead_id = record_incident(production)
    incident = tmp_path / "incident.json"
    db = ["--db", f"sqlite:///{production}", "--pack", pack_file(tmp_path)]
    assert main(["thread", "export", lead_id, "-o", str(incident), *db]) == 0
    changed = pack_file(tmp_path, "You run the research office.")
    laptop = ["--db", f"sqlite:///{tmp_path / 'laptop.db'}", "--pack", changed]
    code = main(["replay", str(incident), *laptop])
    out = capsys.readouterr().out
    assert code == 1
    assert "request_changed at root, #1: the system prompt changed" in out
    assert "+You run the research office." in out
    assert main(["replay", str(incident), "--json", *laptop]) == 1
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert report["divergence"]["kind"] == "request_changed"


def test_an_unknown_document_is_an_error_naming_the_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "zip"}')
    laptop = ["--db", f"sqlite:///{tmp_path / 'laptop.db'}", "--pack", pack_file(tmp_path)]
    assert main(["thread", "import", str(bad), *laptop]) == 1
    assert "not an sa-thread/1 document" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_an_exported_incident_replays_inside_a_test(tmp_path: Path) -> None:
    runtime = Runtime(
        packs=[desk_pack([])],
        providers={"test": desk_model()},
        database_url=f"sqlite:///{tmp_path / 'production.db'}",
        load_entrypoints=False,
    )
    async with runtime:
        document = await (await run_desk(runtime)).export()
    incident = tmp_path / "incident.json"
    incident.write_text(json.dumps(document))

    assert_identical(await replay_export(incident, packs=[desk_pack([])]))
    changed = await replay_export(incident, packs=[desk_pack([], lead_prompt="You run a desk.")])
    with pytest.raises(AssertionError, match="request_changed at root, #1"):
        assert_identical(changed)


def test_a_server_started_with_no_record_keeps_usage_only_and_its_threads_cannot_replay(
    tmp_path: Path,
) -> None:
    server = ServeProcess(
        tmp_path,
        f"sqlite:///{tmp_path / 'sa.db'}",
        "--test-provider",
        "--no-record",
        "--pack",
        pack_file(tmp_path),
        pythonpath=[Path(__file__).parent],
    )
    try:
        server.wait_ready()
        key = server.printed_key()
        base = f"{server.url}/api/packages/desk/threads"
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
            thread = http.post(f"{base}/", json={"agent": "lead"}).json()["id"]
            posted = http.post(f"{base}/{thread}/messages", json={"content": "hi"})
            assert posted.status_code == 202
            deadline = time.monotonic() + 60
            while not any(
                m["role"] == "assistant"
                for m in http.get(f"{base}/{thread}/messages").json()["messages"]
            ):
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.05)
            document = http.get(f"{base}/{thread}/export").json()
            replay = http.post(f"{base}/{thread}/replay", json={})
    finally:
        server.stop()
    root = document["thread"]
    assert root["model_calls"] == []
    assert [log["type"] for log in root["logs"]] == ["llm_call"]
    assert replay.status_code == 422, replay.text
    assert "were not recorded (root: 1)" in replay.json()["detail"]
