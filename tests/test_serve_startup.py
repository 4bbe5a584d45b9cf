"""What ``sa serve`` says at start-up: where things are, a curl to paste, missing keys, and a
taken port reported before any "Serving" line."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar, asgi, get, post
from litestar.params import FromPath
from serve_process import ServeProcess

from sa_core.cli.serve_banner import BindError, banner, bind, display_host, has_console

PACK_FILE = """
from sa_core import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="banner_demo",
    agents=[define_agent(name="helper", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="Hi")],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
)
"""


def serve(tmp_path: Path, *extra: str, port: int | None = None) -> ServeProcess:
    """``sa serve`` of the banner pack (on ``port``, else a free one), without an OpenAI key."""
    (tmp_path / "banner_pack.py").write_text(PACK_FILE)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    pack = str(tmp_path / "banner_pack.py")
    return ServeProcess(tmp_path, db, "--pack", pack, *extra, env=env, port=port)


def printed_banner(server: ServeProcess) -> list[str]:
    """What the server printed up to its banner's last line (the curl to paste)."""
    server.wait_line("curl -H")
    return "".join(server.printed).splitlines()


def test_serve_says_where_everything_is_warns_about_missing_keys_and_prints_a_working_curl(
    tmp_path: Path,
) -> None:
    server = serve(tmp_path)
    port = server.port
    try:
        lines = printed_banner(server)
        text = "\n".join(lines)
        base = f"http://127.0.0.1:{port}"
        serving = next(i for i, line in enumerate(lines) if line.startswith("Serving packages"))
        warning = (
            "warning: model banner_demo/m (openai gpt-4o-mini): OPENAI_API_KEY is not set, so "
            "its turns will fail; set the key, or serve with --test-provider."
        )
        assert warning in lines[:serving]
        assert f"  API:     {base}/api/packages" in lines
        assert f"  Docs:    {base}/schema" in lines
        assert f"  Console: {base}/" in lines  # the web console is served at / unless --no-ui
        token = next(w for w in text.split() if w.startswith("sa_"))
        curl = lines[-1].strip()
        assert curl == f'curl -H "Authorization: Bearer {token}" {base}/api/packages'
        argv = shlex.split(curl)
        header, url = argv[2], argv[3]
        name, _, value = header.partition(": ")
        server.wait_ready()
        answer = httpx.get(url, headers={name: value}, timeout=60)
        assert answer.status_code == 200
        assert "banner_demo" in {p["name"] for p in answer.json()["packages"]}
    finally:
        server.stop()


def test_a_taken_port_is_an_error_before_any_serving_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = serve(tmp_path, port=port)
        try:
            code = server.wait_exit()
        finally:
            server.stop()
        output = server.output()
    assert code == 1
    assert f"error: cannot listen on 127.0.0.1:{port}: " in output
    advice = "Address already in use. Another program is using the port: pick another with --port"
    assert advice in output
    assert "Serving" not in output and "Created API key" not in output


class FakeRuntime:
    class registry:  # noqa: N801 - mimics runtime.registry
        scopes = {"alpha": None, "beta": None}


def test_banner_lists_the_console_only_when_the_app_has_a_root_route() -> None:
    @get("/")
    async def console() -> str:
        return "console"

    @get("/other")
    async def other() -> str:
        return "other"

    with_console = Litestar([console, other])
    without = Litestar([other])
    assert has_console(with_console) and not has_console(without)
    lines = banner(with_console, FakeRuntime(), "0.0.0.0", 9000, None)  # type: ignore[arg-type]
    assert lines[0] == "Serving packages alpha, beta at http://127.0.0.1:9000/api/packages"
    assert "  Console: http://127.0.0.1:9000/" in lines
    assert '  curl -H "Authorization: Bearer $SA_API_KEY" http://127.0.0.1:9000/api/packages' in (
        lines
    )
    assert not any("Console" in line for line in banner(without, FakeRuntime(), "h", 1, "t"))  # type: ignore[arg-type]
    assert display_host("::1") == "[::1]"


def test_banner_lists_each_protocol_the_app_serves_and_only_those() -> None:
    @get("/v1/models")
    async def models() -> str:
        return "models"

    @asgi("/a2a", is_mount=True, copy_scope=True)
    async def a2a(scope: Any, receive: Any, send: Any) -> None:
        return None

    @post("/ag-ui/{package:str}/{agent:str}")
    async def agui(package: FromPath[str], agent: FromPath[str]) -> str:
        return "events"

    app = Litestar([models, a2a, agui])
    lines = banner(app, FakeRuntime(), "::", 8000)  # type: ignore[arg-type]
    assert "  OpenAI:  http://127.0.0.1:8000/v1" in lines
    assert "  A2A:     http://127.0.0.1:8000/a2a" in lines
    assert "  AG-UI:   http://127.0.0.1:8000/ag-ui" in lines
    assert not [line for line in lines if line.startswith("  MCP:")]  # its SDK is missing


def test_an_unknown_host_says_to_check_the_host() -> None:
    with pytest.raises(BindError) as caught:
        bind("no-such-host.invalid", 0)
    assert str(caught.value).startswith("cannot listen on no-such-host.invalid:0: ")
    assert str(caught.value).endswith("Check --host (an address such as 127.0.0.1 or 0.0.0.0).")


@pytest.mark.asyncio
async def test_connections_accepted_on_the_serve_socket_do_not_wait_on_nagle() -> None:
    """A kept-alive response written in two parts must not wait ~40 ms for a delayed ACK."""
    import asyncio

    listener = bind("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=listener)
    async with server:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 60) != 0
        writer.close()


def test_make_setup_reports_each_step_and_lets_pip_show_progress(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    plan = subprocess.run(
        ["make", "-n", "setup", f"VENV={tmp_path / 'venv'}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    steps = [line for line in plan.splitlines() if line.startswith('echo "==> ')]
    assert len(steps) == 4, plan
    install = next(line for line in plan.splitlines() if '-e ".[test]"' in line)
    assert "--quiet" not in install


def test_the_log_level_also_quiets_libraries_the_app_configured_at_info() -> None:
    """Litestar's logging configuration sets the root logger to ``info``: without the level
    applied to it, ``--log-level warning`` still wrote httpx's line per model request."""
    import logging

    from sa_core.server.runner import build_server

    root = logging.getLogger()
    before = root.level
    try:
        app = Litestar(route_handlers=[])
        assert logging.getLogger("httpx").isEnabledFor(logging.INFO)  # as the app left it
        build_server(app, port=0, log_level="warning", handle_signals=False)
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
        assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)
        build_server(app, port=0, log_level="info", handle_signals=False)
        assert logging.getLogger("httpx").isEnabledFor(logging.INFO)
    finally:
        root.setLevel(before)


def test_serve_with_the_test_provider_says_models_are_offline_and_how_to_use_real_ones(
    tmp_path: Path,
) -> None:
    server = serve(tmp_path, "--test-provider")
    port = server.port
    try:
        lines = printed_banner(server)
    finally:
        server.stop()
    serving = next(i for i, line in enumerate(lines) if line.startswith("Serving packages"))
    banner_lines = lines[serving:]
    base = f"http://127.0.0.1:{port}"
    assert [
        f"  OpenAI:  {base}/v1",
        f"  MCP:     {base}/mcp",
        f"  A2A:     {base}/a2a",
        f"  AG-UI:   {base}/ag-ui",
    ] == [
        line
        for line in banner_lines
        if line.split(":")[0].strip() in ("OpenAI", "MCP", "A2A", "AG-UI")
    ]
    assert (
        "  Models:  offline. Every model is answered by the offline test provider "
        "(--test-provider): 'Test response received.'; a message '/tool NAME {json}' makes it "
        "call that tool." in banner_lines
    )
    assert (
        "  Real models: export OPENAI_API_KEY=... and run make serve again (with sa serve, "
        "leave out --test-provider)." in banner_lines
    )
    assert not [line for line in lines if line.startswith("warning: model")]


@pytest.mark.asyncio
async def test_the_offline_banner_names_only_the_keys_the_served_models_still_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sa_providers.anthropic
    import sa_providers.openai
    from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
    from sa_core.cli.serve_banner import offline_lines

    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    pack = Pack(
        name="two_providers",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="a", prompt="Hi")],
        models=[
            define_model(name="a", provider="anthropic", model="claude-x"),
            define_model(name="o", provider="openai", model="gpt-4o-mini"),
            define_model(name="o2", provider="openai", model="gpt-4o"),
        ],
    )
    async with Runtime(
        [pack],
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
        plugins=[sa_providers.anthropic, sa_providers.openai],
        offline=True,
    ) as runtime:
        models, real = offline_lines(runtime, True)
        assert models.startswith("  Models:  offline. Every model is answered")
        assert real == (
            "  Real models: export ANTHROPIC_API_KEY=... OPENAI_API_KEY=... and run make serve "
            "again (with sa serve, leave out --test-provider)."
        )
        runtime.env["ANTHROPIC_API_KEY"] = "a-key"
        monkeypatch.setenv("OPENAI_API_KEY", "o-key")
        assert offline_lines(runtime, "script.yaml") == [
            "  Models:  offline. Every model is answered by the offline test provider "
            "(--test-provider): the answers of script.yaml; a message '/tool NAME {json}' makes "
            "it call that tool.",
            "  Real models: run make serve again (with sa serve, leave out --test-provider).",
        ]


def make_serve_plan(tmp_path: Path, keys: dict[str, str], *args: str) -> str:
    """What ``make -n serve`` would run with only ``keys`` among the provider keys set."""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        ["make", "-n", "serve", f"VENV={tmp_path / 'venv'}", *args],
        cwd=root,
        env={**env, **keys},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def serve_line(plan: str) -> str:
    return next(line for line in plan.splitlines() if "bin/sa serve" in line)


def test_make_serve_answers_offline_and_says_why_only_when_no_provider_key_is_set(
    tmp_path: Path,
) -> None:
    from sa_core.plugins import create_plugin_host

    offline = make_serve_plan(tmp_path, {})
    assert "--test-provider" in serve_line(offline)
    assert "no provider key is set" in offline
    assert "--test-provider" in serve_line(make_serve_plan(tmp_path, {"OPENAI_API_KEY": ""}))
    # every key a built-in provider requires switches to real models
    required = {
        provider.key_variable
        for provider in create_plugin_host(load_entrypoints=True).providers.values()
        if type(provider).__module__.startswith("sa_providers.")
        and getattr(provider, "key_required", True)
        and getattr(provider, "key_variable", None)
    }
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"} <= required
    for key in sorted(required):
        plan = make_serve_plan(tmp_path, {key: "set"})
        assert "--test-provider" not in serve_line(plan), key
        assert "no provider key is set" not in plan, key
    # OFFLINE= serves real (keyless) providers; a script given in SERVE_ARGS still wins
    assert "--test-provider" not in serve_line(make_serve_plan(tmp_path, {}, "OFFLINE="))
    scripted = serve_line(make_serve_plan(tmp_path, {}, "SERVE_ARGS=--test-provider=s.yaml"))
    assert scripted.endswith("--test-provider --test-provider=s.yaml")
