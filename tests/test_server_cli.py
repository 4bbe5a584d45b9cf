"""``sa keys`` in process, and ``sa serve`` as a real subprocess on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from serve_process import ServeProcess

from sa_core.cli import main

PACK_FILE = """
from sa_core import Pack, define_agent, define_model, define_prompt

model = define_model(name="m", provider="openai", model="gpt-4o-mini")
prompt = define_prompt(name="main", model="m", prompt="Hi")
pack = Pack(
    name="cli_demo",
    agents=[define_agent(name="helper", side_a={"prompt": "main"})],
    prompts=[prompt],
    models=[model],
    version="0.9.0",
)
"""


def test_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    assert main(["keys", "list", "--db", db]) == 0
    assert "No API keys" in capsys.readouterr().out
    assert main(["keys", "create", "--name", "ci", "--db", db]) == 0
    created = capsys.readouterr().out.splitlines()
    token = created[-1]
    assert token.startswith("sa_") and len(token) > 30
    assert main(["keys", "list", "--db", db]) == 0
    listing = capsys.readouterr().out
    assert "ci" in listing and token[:11] in listing and token not in listing
    assert main(["keys", "revoke", token[:11], "--db", db]) == 0
    assert "Revoked" in capsys.readouterr().out
    assert main(["keys", "revoke", token[:11], "--db", db]) == 1
    assert main(["keys", "list", "--db", db]) == 0
    assert "UTC" in capsys.readouterr().out.splitlines()[-1].split(token[:11])[1]


def test_keys_create_with_packages_and_read_only_makes_a_scoped_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from sa_core.store import open_store

    db = f"sqlite:///{tmp_path / 'sa.db'}"
    args = ["keys", "create", "--name", "team", "--package", "support_desk", "--package"]
    assert main([*args, "notes", "--read-only", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    token = lines[-1]
    assert lines[-2].endswith(
        "; read-only, packages notes and support_desk). It is shown only once:"
    )
    assert main(["keys", "create", "--name", "typo", "--package", "suport_desk", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("note: no installed pack is named 'suport_desk'; the key opens it")
    assert main(["keys", "list", "--db", db]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].endswith("REVOKED               ACCESS")
    assert listing[1].endswith("  read-only, packages notes and support_desk")
    assert listing[2].endswith("  read-write, package suport_desk")

    async def stored() -> tuple[object, ...]:
        store = await open_store(db)
        try:
            key = await store.verify_api_key(token)
        finally:
            await store.close()
        assert key is not None
        return key.packages, key.read_only, key.allows("notes"), key.allows("reminders")

    assert asyncio.run(stored()) == (("notes", "support_desk"), True, True, False)
    assert main(["keys", "create", "--package", " ", "--db", db]) == 2
    assert "--package needs a package name" in capsys.readouterr().err


def test_keys_revoke_takes_the_whole_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    assert main(["keys", "create", "--db", db]) == 0
    token = capsys.readouterr().out.splitlines()[-1]
    assert main(["keys", "revoke", token, "--db", db]) == 0
    assert capsys.readouterr().out == f"Revoked {token[:11]}.\n"
    assert main(["keys", "revoke", token, "--db", db]) == 1
    out = capsys.readouterr().out
    assert out == f"No active key matches '{token[:11]}...' (see 'sa keys list').\n"
    assert token not in out


def serve(tmp_path: Path, db: str, *extra: str, sigint_ignored: bool = False) -> ServeProcess:
    """``sa serve`` of the demo pack on ``db``."""
    (tmp_path / "demo_pack.py").write_text(PACK_FILE)
    pack = str(tmp_path / "demo_pack.py")
    return ServeProcess(tmp_path, db, "--pack", pack, *extra, sigint_ignored=sigint_ignored)


def test_sa_serve_prints_a_first_key_once_and_serves_the_named_pack(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    server = serve(tmp_path, db)
    try:
        server.wait_line("Serving packages")
        text = server.output()
        assert "Created API key 'default'" in text and "cli_demo" in text
        token = next(w for w in text.split() if w.startswith("sa_"))
        server.wait_ready()
        base = f"http://127.0.0.1:{server.port}/api/packages"
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(base, timeout=60).status_code == 401
        packages = httpx.get(base, headers=headers, timeout=60).json()["packages"]
        named = {p["name"]: (p["version"], p["source"]) for p in packages}
        assert named["cli_demo"] == ("0.9.0", "local")
        assert all(source == "entry_point" for n, (_, source) in named.items() if n != "cli_demo")
        created = httpx.post(
            f"{base}/cli_demo/threads", json={"agent": "helper"}, headers=headers, timeout=60
        )
        assert created.status_code == 201
    finally:
        code = server.stop()
    assert code in (0, 130), server.output()

    again = serve(tmp_path, db)
    try:
        again.wait_line("Serving packages")
        again.wait_ready()
        assert "Created API key" not in again.output()
        thread = created.json()["id"]
        url = f"http://127.0.0.1:{again.port}/api/packages/cli_demo/threads/{thread}"
        assert httpx.get(url, headers=headers, timeout=60).status_code == 200
    finally:
        assert again.stop() in (0, 130)


def test_sa_serve_says_when_every_key_is_revoked_and_when_models_are_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    assert main(["keys", "create", "--db", db]) == 0
    token = capsys.readouterr().out.splitlines()[-1]
    assert main(["keys", "revoke", token, "--db", db]) == 0
    server = serve(tmp_path, db, "--test-provider")
    try:
        server.wait_line("curl -H")  # the banner's last line
        text = server.output()
    finally:
        assert server.stop() in (0, 130)
    assert "Created API key" not in text
    assert (
        "warning: every API key of this database is revoked, so every request will be refused; "
        f"create one with 'sa keys create --db {db}'." in text
    )
    assert "Every model is answered by the offline test provider (--test-provider)" in text


def test_sa_serve_started_with_sigint_ignored_still_stops_on_sigint_while_starting(
    tmp_path: Path,
) -> None:
    # The interrupt comes right after the banner, before uvicorn handles signals itself.
    for _ in range(3):
        server = serve(tmp_path, f"sqlite:///{tmp_path / 'sa.db'}", "--test-provider",
                       sigint_ignored=True)  # fmt: skip
        try:
            server.wait_line("Serving packages")
        finally:
            assert server.stop() in (0, 130)
