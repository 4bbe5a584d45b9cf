"""The offline walkthroughs of the docs run as written (tutorial section 5, testing guide)."""

from __future__ import annotations

import io
import re
import shlex
import textwrap
from pathlib import Path

import pytest

from sa_core.cli import main
from sa_core.offline import load_script

ROOT = Path(__file__).resolve().parents[1]


def fenced(document: str, language: str) -> list[str]:
    """The fenced code blocks of one language in a doc, in order."""
    text = (ROOT / document).read_text()
    blocks = re.findall(rf"^ *```{language}\n(.*?)^ *```", text, flags=re.S | re.M)
    return [textwrap.dedent(block) for block in blocks]


def test_the_tutorial_offline_script_session_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "kitchen-units"
    (project / "kitchen_units").mkdir(parents=True)
    (project / "pyproject.toml").write_text(fenced("docs/tutorial.md", "toml")[0])
    (project / "kitchen_units" / "__init__.py").write_text(fenced("docs/tutorial.md", "python")[0])
    (tmp_path / "script.yaml").write_text(fenced("docs/tutorial.md", "yaml")[0])
    session = next(
        block for block in fenced("docs/tutorial.md", "console") if "--test-provider=" in block
    )
    lines = session.splitlines()
    command = shlex.split(lines[0].removeprefix("$ "))
    typed = [line.removeprefix("you> ") for line in lines if line.startswith("you> ")]
    shown = [line for line in lines[1:] if not line.startswith("you> ")]

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{text}\n" for text in typed)))
    assert command[0] == "sa"
    assert main(command[1:]) == 0
    out = capsys.readouterr().out
    printed = [line.removeprefix("you> ") for line in out.splitlines()]
    assert [line for line in printed if line.strip()] == shown


def test_the_testing_guide_script_loads_with_every_kind_of_entry(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(next(b for b in fenced("docs/testing.md", "yaml") if "responses:" in b))
    script = load_script(path)
    first, text, reasoning, error = script.responses
    assert (first.tool_calls, first.content) == (
        [{"name": "lookup", "arguments": {"q": "tea"}}],
        "Let me look that up.",
    )
    assert text.content == "Green tea it is."
    assert reasoning.reasoning == "The user wants a short answer."
    assert error.error == {
        "message": "The model is overloaded.",
        "code": "server_error",
        "status": 529,
    }
    assert error.delay == 1.5
    assert (script.chunk_size, script.chunk_delay) == (4, 0.05)
