"""Without the ``mcp`` SDK the MCP routes are absent and ``sa serve`` says why in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from serve_process import free_port

from sa_core import Runtime
from sa_core.server import create_app
from sa_core.server.protocols.mcp import mcp_unavailable

HIDE_SDK = "import sys; sys.modules['mcp'] = None; from sa_core.cli import main; sys.exit(main())"
NOTE = (
    "note: the MCP server (/mcp) is off: the mcp SDK is not installed "
    "(pip install 'standard-agents[mcp]')"
)


def test_without_the_sdk_the_app_has_no_mcp_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if it were not installed
    assert mcp_unavailable() == NOTE.removeprefix("note: ")
    runtime = Runtime(database_url=f"sqlite:///{tmp_path / 'sa.db'}", load_entrypoints=False)
    assert not [route.path for route in create_app(runtime).routes if "mcp" in route.path]


def test_without_the_sdk_sa_serve_says_why_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HIDE_SDK, "serve", "--port", str(free_port()),
         "--db", f"sqlite:///{tmp_path / 'sa.db'}", "--test-provider", "--log-level", "warning"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:  # until the banner, which ends with the curl line
            lines.append(line.rstrip("\n"))
            if line.lstrip().startswith("curl "):
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert NOTE in lines, "\n".join(lines)
    assert not [line for line in lines if line.startswith("  MCP:")]
