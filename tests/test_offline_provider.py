"""The offline model of ``sa run|serve --test-provider``: script files, ``/tool``, honest logs.

Also: a stopped streaming answer keeps its text, and ``sa_core`` needs no terminal libraries.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.cli import build_parser, main
from sa_core.offline import (
    RECORDED_REQUESTS,
    OfflineProvider,
    ScriptFileError,
    load_script,
)
from sa_core.providers import BaseProvider, ProviderMessage, ProviderRequest, StreamChunk
from sa_core.server import create_app


def weather(state: Any, args: Any) -> str:
    return f"sunny in {args['city']}"


def demo_pack() -> Pack:
    tool = define_tool(
        name="weather",
        description="Weather of a city.",
        args={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        execute=weather,
    )
    return Pack(
        name="demo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[
            define_prompt(
                name="main", model="fast", prompt="Help.", include_chat=True, tools=["weather"]
            )
        ],
        models=[
            define_model(
                name="fast",
                provider="openai",
                model="gpt-4o-mini",
                input_price=1.0,
                output_price=2.0,
            )
        ],
        tools=[tool],
    )


PACK_SOURCE = textwrap.dedent(
    """
    from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

    pack = Pack(
        name="demo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="Help.", include_chat=True,
                               tools=["weather"])],
        models=[define_model(name="fast", provider="openai", model="gpt-4o-mini")],
        tools=[define_tool(
            name="weather", description="Weather.",
            args={"type": "object", "properties": {"city": {"type": "string"}}},
            execute=lambda s, a: "sunny in " + a["city"] + ". " + "x" * 300,
        )],
    )
    """
)

SCRIPT = textwrap.dedent(
    """
    responses:
      - text: Let me check.
        tool_calls:
          - name: weather
            arguments: {city: Paris}
      - text: It is sunny in Paris.
      - error: The request is malformed.
        status: 400
    """
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


async def turn(runtime: Runtime, thread_id: str, text: str) -> list[Any]:
    thread = await runtime.get_thread(thread_id)
    await thread.send_message(text)
    return list((await thread.get_messages()).messages)


# -- script files ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_yaml_script_answers_with_tool_calls_text_then_its_error(tmp_path: Path) -> None:
    script = write(tmp_path, "script.yaml", SCRIPT)
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()], database_url=db, load_entrypoints=False, offline=script
    ) as runtime:
        thread = await runtime.create_thread("helper")
        messages = await turn(runtime, thread.thread_id, "Weather?")
        assert [(m.role, m.content) for m in messages] == [
            ("user", "Weather?"),
            ("assistant", "Let me check."),
            ("tool", "sunny in Paris"),
            ("assistant", "It is sunny in Paris."),
        ]
        assert messages[1].tool_calls[0].function.name == "weather"
        assert json.loads(messages[1].tool_calls[0].function.arguments) == {"city": "Paris"}
        await turn(runtime, thread.thread_id, "Again?")
        logs = await thread.get_logs(limit=50)
    errors = [log.data["error"] for log in logs if log.type == "step_error"]
    assert len(errors) == 1 and "The request is malformed." in errors[0]


@pytest.mark.asyncio
async def test_a_json_script_of_plain_strings_is_a_script_too(tmp_path: Path) -> None:
    script = write(tmp_path, "script.json", json.dumps(["First.", {"text": "Second."}]))
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()], database_url=db, load_entrypoints=False, offline=script
    ) as runtime:
        thread = await runtime.create_thread("helper")
        await turn(runtime, thread.thread_id, "one")
        messages = await turn(runtime, thread.thread_id, "two")
    assert [m.content for m in messages if m.role == "assistant"] == ["First.", "Second."]


def test_a_script_streams_in_the_chunks_it_asks_for(tmp_path: Path) -> None:
    script = load_script(
        write(tmp_path, "s.yaml", "stream: {chunk_size: 3, chunk_delay: 0.5}\nresponses: [Hi]\n")
    )
    assert (script.chunk_size, script.chunk_delay, len(script)) == (3, 0.5, 1)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("s.yaml", "responses: []\n", "'responses' must be a non-empty list"),
        ("s.yaml", "- texte: hi\n", "response 1: unknown key(s) ['texte']"),
        ("s.yaml", "- text: ok\n- 42\n", "response 2: expected a mapping"),
        ("s.yaml", "- tool_calls: [{arguments: {}}]\n", "response 1, tool call 1: needs a 'name'"),
        (
            "s.yaml",
            "- tool_calls: [{name: w, arguments: [1]}]\n",
            "tool call 1 (w): 'arguments' must be a mapping",
        ),
        ("s.yaml", "- error: boom\n  text: hi\n", "an error response cannot also have ['text']"),
        ("s.yaml", "- text: hi\n  delay: -1\n", "'delay' must be a number of seconds >= 0"),
        ("s.yaml", "- {}\n", "response 1: give 'text', 'tool_calls' or 'error'"),
        ("s.yaml", "responses: [hi]\nstream: {chunk_size: 0}\n", "'chunk_size' must be"),
        ("s.yaml", "responses: [hi]\nmode: fast\n", "unknown top-level key(s) ['mode']"),
        ("s.yaml", "- text: [unclosed\n", "invalid YAML"),
        ("s.json", "[{", "invalid JSON at line 1"),
    ],
)
def test_a_bad_script_names_the_file_and_the_entry(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(ScriptFileError) as caught:
        load_script(path)
    message = str(caught.value)
    assert message.startswith(f"Offline script {path}")
    assert expected in message


def test_sa_run_with_a_missing_script_says_which_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = write(tmp_path, "demo_pack.py", PACK_SOURCE)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    args = ["run", "helper", "--pack", str(pack), "--test-provider=nope.yaml", "--db", db]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "error: Offline script nope.yaml: cannot read it" in err
    assert "--test-provider=FILE" in err


def test_test_provider_takes_an_optional_script_on_run_and_serve() -> None:
    parser = build_parser()
    for command in (["run", "helper"], ["serve"]):
        assert parser.parse_args(command).test_provider is False
        assert parser.parse_args([*command, "--test-provider"]).test_provider is True
        given = parser.parse_args([*command, "--test-provider=s.yaml"])
        assert given.test_provider == "s.yaml"


# -- /tool commands ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_tool_command_calls_the_tool_and_reports_its_result(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()], database_url=db, load_entrypoints=False, offline=True
    ) as runtime:
        thread = await runtime.create_thread("helper")
        messages = await turn(runtime, thread.thread_id, '/tool weather {"city": "Rome"}')
    call = messages[1].tool_calls[0]
    assert call.function.name == "weather"
    assert json.loads(call.function.arguments) == {"city": "Rome"}
    assert (messages[2].role, messages[2].content) == ("tool", "sunny in Rome")
    assert messages[3].content == "weather returned: sunny in Rome"


@pytest.mark.asyncio
async def test_a_tool_command_does_not_use_up_the_script(tmp_path: Path) -> None:
    script = write(tmp_path, "s.yaml", "- Scripted answer.\n")
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()], database_url=db, load_entrypoints=False, offline=script
    ) as runtime:
        thread = await runtime.create_thread("helper")
        await turn(runtime, thread.thread_id, '/tool weather {"city": "Oslo"}')
        messages = await turn(runtime, thread.thread_id, "and now?")
    assert messages[-1].content == "Scripted answer."


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("command", "answer"),
    [
        (
            "/tool forecast {}",
            "(offline) No tool 'forecast' is offered here. Offered tools: weather.",
        ),
        (
            "/tool weather city=Rome",
            "(offline) The arguments of /tool weather must be a JSON object, e.g. /tool weather "
            '{"key": "value"}; got city=Rome',
        ),
    ],
)
async def test_a_bad_tool_command_is_answered_with_what_to_type(
    tmp_path: Path, command: str, answer: str
) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()], database_url=db, load_entrypoints=False, offline=True
    ) as runtime:
        thread = await runtime.create_thread("helper")
        messages = await turn(runtime, thread.thread_id, command)
    assert [m.content for m in messages[1:]] == [answer]


def test_sa_run_shows_tool_arguments_and_results_shortened_unless_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = write(tmp_path, "demo_pack.py", PACK_SOURCE)
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    args = ["run", "helper", "--pack", str(pack), "--test-provider", "--db", db]
    monkeypatch.setattr("sys.stdin", io.StringIO('/tool weather {"city": "Rome"}\n'))
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert '  -> weather {"city": "Rome"}' in out
    result = next(line for line in out.splitlines() if line.startswith("  <- weather: "))
    assert result.startswith("  <- weather: sunny in Rome. xxx") and result.endswith("...")
    assert len(result) < 140
    thread_id = err.split()[1]
    assert f"Resume this thread with: sa run helper --thread {thread_id} --pack" in err

    monkeypatch.setattr("sys.stdin", io.StringIO('/tool weather {"city": "Rome"}\n'))
    assert main([*args, "--verbose"]) == 0
    assert "  <- weather: sunny in Rome. " + "x" * 300 in capsys.readouterr().out


def test_sa_run_resumed_prints_the_last_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = write(tmp_path, "demo_pack.py", PACK_SOURCE)
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    args = ["run", "helper", "--pack", str(pack), "--test-provider", "--db", db]
    monkeypatch.setattr("sys.stdin", io.StringIO("first question\n"))
    assert main(args) == 0
    thread_id = capsys.readouterr().err.split()[1]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main([*args, "--thread", thread_id]) == 0
    out = capsys.readouterr().out
    assert "Last 2 of 2 messages:\nyou: first question\nagent: Test response received.\n" in out


# -- honest logs, bounded memory -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_offline_calls_are_logged_as_the_test_provider_with_no_cost(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()], database_url=db, load_entrypoints=False, offline=True
    ) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("hi")
        logs = [log for log in await thread.get_logs() if log.type == "llm_call"]
    assert len(logs) == 1
    data = logs[0].data
    assert (data["provider"], data["model"], data["model_name"]) == (
        "test",
        "offline:gpt-4o-mini",
        "fast",
    )
    assert data["cost_total"] is None


@pytest.mark.asyncio
async def test_the_offline_provider_keeps_only_recent_requests() -> None:
    provider = OfflineProvider()
    for number in range(RECORDED_REQUESTS * 3):
        request = ProviderRequest(model="m", messages=[ProviderMessage("user", f"q{number}")])
        response = await provider.generate(request)
        assert response.content == "Test response received."
    assert len(provider.requests) == RECORDED_REQUESTS
    assert provider.last_user_message() == f"q{RECORDED_REQUESTS * 3 - 1}"


def test_sa_serve_answers_from_an_offline_script(tmp_path: Path) -> None:
    script = write(tmp_path, "script.yaml", SCRIPT)
    runtime = Runtime(
        packs=[demo_pack()],
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
        offline=str(script),
    )
    with TestClient(create_app(runtime)) as client:
        token, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {token}"
        base = "/api/packages/demo/threads"
        thread_id = client.post(base, json={"agent": "helper"}).json()["id"]
        sent = client.post(f"{base}/{thread_id}/messages", json={"content": "Weather?"})
        assert sent.status_code == 202
        client.blocking_portal.call(runtime.wait_idle, 10)
        messages = client.get(f"{base}/{thread_id}/messages").json()["messages"]
        logs = client.get(f"{base}/{thread_id}/logs").json()["logs"]
    assert [m.get("content") for m in messages][-2:] == ["sunny in Paris", "It is sunny in Paris."]
    calls = [log["data"] for log in logs if log["type"] == "llm_call"]
    assert {(c["provider"], c["model"]) for c in calls} == {("test", "offline:gpt-4o-mini")}


# -- a stopped answer keeps its text -----------------------------------------------------------


class HalfAnswer(BaseProvider):
    """Streams a few words, then waits forever (until the turn is stopped)."""

    def __init__(self) -> None:
        super().__init__(name="openai")
        self.started = asyncio.Event()
        self.requests: list[ProviderRequest] = []

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        if len(self.requests) > 1:
            yield StreamChunk("content-delta", delta="Fine.")
            yield StreamChunk("finish", finish_reason="stop")
            return
        yield StreamChunk("content-delta", delta="The first half ")
        yield StreamChunk("content-delta", delta="of an answer")
        self.started.set()
        await asyncio.Event().wait()


@pytest.mark.asyncio
@pytest.mark.parametrize("watched", [True, False])
async def test_stopping_a_streaming_answer_keeps_what_was_said(
    tmp_path: Path, watched: bool
) -> None:
    provider = HalfAnswer()
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    async with Runtime(
        packs=[demo_pack()],
        providers={"openai": provider},
        database_url=db,
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("helper")
        if watched:
            async with runtime.events.subscribe(thread.thread_id):
                await thread.send_message("Tell me", wait=False)
                await provider.started.wait()
                await thread.stop()
        else:
            await thread.send_message("Tell me", wait=False)
            await provider.started.wait()
            await thread.stop()
        stopped = (await thread.get_messages()).messages[-1]
        await thread.send_message("Go on")
    assert (stopped.role, stopped.status, stopped.content) == (
        "assistant",
        "completed",
        "The first half of an answer",
    )
    assert stopped.metadata == {"stopped": "Execution stopped by user"}
    context = [(m.role, m.content) for m in provider.requests[1].messages if m.role != "system"]
    assert context == [
        ("user", "Tell me"),
        ("assistant", "The first half of an answer"),
        ("user", "Go on"),
    ]


# -- sa_core without the terminal libraries ------------------------------------------------------


def test_sa_core_and_a_piped_sa_run_work_without_the_terminal_libraries(tmp_path: Path) -> None:
    write(tmp_path, "demo_pack.py", PACK_SOURCE)
    program = textwrap.dedent(
        """
        import io, sys
        for name in ("prompt_toolkit", "rich"):
            sys.modules[name] = None  # importing them now fails
        import sa_core, sa_core.offline, sa_core.cli.run, sa_core.cli.chat
        from sa_core.cli import main
        sys.stdin = io.StringIO("hello\\n")
        code = main(["run", "helper", "--pack", "demo_pack.py", "--test-provider",
                     "--db", "sqlite:///chat.db"])
        print("exit", code)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "agent> Test response received." in result.stdout
    assert result.stdout.rstrip().endswith("exit 0")
