"""`sa run`: an interactive chat that streams replies and shows tool calls."""

from __future__ import annotations

import io
import textwrap

from sa_core.cli import main

PACK = textwrap.dedent(
    """
    from pydantic import BaseModel
    from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

    class Args(BaseModel):
        city: str

    pack = Pack(
        name="demo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="Help.", include_chat=True, tools=["weather"])],
        models=[define_model(name="fast", provider="openai", model="gpt-4o-mini")],
        tools=[define_tool(name="weather", description="Weather.", args=Args, execute=lambda s, a: "sunny")],
    )
    """
)


def test_sa_run_chats_with_the_test_provider(tmp_path, monkeypatch, capsys):
    pack_file = tmp_path / "demo_pack.py"
    pack_file.write_text(PACK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\nsecond line\n"))
    code = main(["run", "helper", "--pack", str(pack_file), "--test-provider", "--db", f"sqlite:///{tmp_path}/run.db"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.count("agent> Test response received.") == 2
    assert "with helper" in err


def test_sa_run_reports_an_unknown_agent(tmp_path, monkeypatch, capsys):
    pack_file = tmp_path / "demo_pack.py"
    pack_file.write_text(PACK)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(["run", "nobody", "--pack", str(pack_file), "--db", f"sqlite:///{tmp_path}/run.db"])
    assert code == 1
    assert "Unknown agent 'nobody'" in capsys.readouterr().err


def test_sa_run_says_why_a_turn_failed(tmp_path, monkeypatch, capsys):
    pack_file = tmp_path / "demo_pack.py"
    pack_file.write_text(PACK)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    code = main(["run", "helper", "--pack", str(pack_file), "--db", f"sqlite:///{tmp_path}/run.db"])
    out = capsys.readouterr().out
    assert code == 0
    assert "error: the turn failed: ProviderError: Provider 'openai' needs the variable" in out
    assert "model call: Provider 'openai' needs the variable OPENAI_API_KEY" in out
    assert "--test-provider answers every model offline" in out


def test_sa_run_resumes_a_thread_only_with_its_pack_loaded(tmp_path, monkeypatch, capsys):
    pack_file = tmp_path / "demo_pack.py"
    pack_file.write_text(PACK)
    db = f"sqlite:///{tmp_path}/run.db"
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    assert main(["run", "helper", "--pack", str(pack_file), "--test-provider", "--db", db]) == 0
    thread = capsys.readouterr().err.split()[1]
    monkeypatch.setattr("sys.stdin", io.StringIO("again\n"))
    assert main(["run", "helper", "--thread", thread, "--test-provider", "--db", db]) == 1
    assert capsys.readouterr().err == (
        f"error: Thread {thread} belongs to package 'demo', which is not loaded; pass the pack "
        "with --pack (or install it).\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("again\n"))
    args = ["run", "helper", "--pack", str(pack_file), "--thread", thread, "--test-provider"]
    assert main([*args, "--db", db]) == 0
    assert capsys.readouterr().out.count("agent> Test response received.") == 1
