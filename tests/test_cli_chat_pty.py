"""Walkthrough: ``sa run`` in a pseudo-terminal, driven as a person would.

Type a message and watch the offline script call a tool (arguments and result shown), interrupt
a slowly streaming answer with Ctrl-C (its text is kept), call a tool with ``/tool``, quit with
Ctrl-D, resume the thread with the printed command and see the history, quit with Ctrl-C.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import sys
import textwrap
from pathlib import Path

import pexpect

from sa_core.packloader import load_packs_from
from sa_core.runtime import Runtime

PACK = textwrap.dedent(
    """
    from pydantic import BaseModel
    from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

    class Args(BaseModel):
        city: str

    pack = Pack(
        name="demo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="Help.", include_chat=True,
                               tools=["weather"])],
        models=[define_model(name="fast", provider="openai", model="gpt-4o-mini")],
        tools=[define_tool(name="weather", description="Weather.", args=Args,
                           execute=lambda s, a: f"sunny in {a.city}")],
    )
    """
)

LONG = " ".join(f"word{n}" for n in range(400))

SCRIPT = textwrap.dedent(
    f"""
    stream: {{chunk_size: 3, chunk_delay: 0.02}}
    responses:
      - text: Let me check.
        tool_calls:
          - name: weather
            arguments: {{city: Paris}}
      - text: "It is **sunny** in Paris."
      - text: "A long story begins. {LONG}"
    """
)


def spawn(args: list[str], cwd: Path) -> pexpect.spawn:
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    return pexpect.spawn(
        sys.executable,
        ["-m", "sa_core.cli", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 200),
    )


def stored_messages(pack_file: Path, db: str, thread_id: str) -> list[dict[str, object]]:
    async def read() -> list[dict[str, object]]:
        packs = load_packs_from(str(pack_file))
        async with Runtime(packs=packs, database_url=db, load_entrypoints=False) as runtime:
            thread = await runtime.get_thread(thread_id)
            page = await thread.get_messages()
            return [m.model_dump() for m in page.messages]

    return asyncio.run(read())


def test_a_terminal_chat_shows_tools_stops_an_answer_and_resumes_with_history(
    tmp_path: Path,
) -> None:
    pack_file = tmp_path / "demo_pack.py"
    pack_file.write_text(PACK)
    (tmp_path / "script.yaml").write_text(SCRIPT)
    db = f"sqlite:///{tmp_path / 'chat.db'}"
    child = spawn(
        ["run", "helper", "--pack", "demo_pack.py", "--test-provider=script.yaml", "--db", db],
        tmp_path,
    )
    try:
        child.expect(r"Thread (\S+) with helper")
        thread_id = child.match.group(1)
        child.expect("you>")
        child.sendline("What is the weather?")
        child.expect(re.escape('-> weather {"city": "Paris"}'))
        child.expect(re.escape("<- weather: sunny in Paris"))
        child.expect("sunny")
        child.expect("you>")

        child.sendline("Tell me a story")
        child.expect("A long story begins")
        child.sendintr()
        child.expect(re.escape("stopped (Ctrl-C): what was said so far is kept"))
        child.expect("you>")

        child.sendline('/tool weather {"city": "Rome"}')
        child.expect(re.escape('-> weather {"city": "Rome"}'))
        child.expect(re.escape("weather returned: sunny in Rome"))
        child.expect("you>")

        child.sendeof()
        child.expect(r"Resume this thread with: (sa run [^\r\n]+)")
        resume = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert resume == (
        f"sa run helper --thread {thread_id} --pack demo_pack.py --db {db} "
        "--test-provider=script.yaml"
    )

    messages = stored_messages(pack_file, db, thread_id)
    stopped = [m for m in messages if (m.get("metadata") or {}).get("stopped")]
    assert len(stopped) == 1
    said = str(stopped[0]["content"])
    assert stopped[0]["status"] == "completed"
    assert said.startswith("A long story begins")
    assert len(said) < len(f"A long story begins. {LONG}")

    again = spawn(shlex.split(resume)[1:], tmp_path)
    try:
        again.expect(r"Last \d+ of \d+ messages")
        again.expect(re.escape("you: What is the weather?"))
        again.expect(re.escape('-> weather {"city": "Paris"}'))
        again.expect(re.escape("you: Tell me a story"))
        again.expect("A long story begins")
        again.expect(re.escape("[stopped]"))
        again.expect(re.escape('you: /tool weather {"city": "Rome"}'))
        again.expect("you>")
        again.sendintr()
        again.expect(r"Resume this thread with: sa run helper --thread " + thread_id)
        again.expect(pexpect.EOF)
    finally:
        again.close(force=True)
    assert again.exitstatus == 0


def test_a_terminal_without_the_chat_extra_gets_the_plain_chat_and_a_hint(tmp_path: Path) -> None:
    (tmp_path / "demo_pack.py").write_text(PACK)
    program = (
        "import sys; sys.modules['prompt_toolkit'] = None; sys.modules['rich'] = None; "
        "from sa_core.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "TERM": "xterm"}
    child = pexpect.spawn(
        sys.executable,
        ["-c", program, "run", "helper", "--pack", "demo_pack.py", "--test-provider"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect(re.escape("pip install 'standard-agents[chat]'"))
        child.expect("you> ")
        child.sendline("hello")
        child.expect(re.escape("agent> Test response received."))
        child.expect("you> ")
        child.sendeof()
        child.expect("Resume this thread with: sa run helper --thread")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
