"""Without the ``mcp`` SDK the MCP routes are absent and ``sa serve`` says why in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serve_process import ServeProcess

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
    db = f"sqlite:///{tmp_path / 'sa.db'}"
    launcher = (sys.executable, "-c", HIDE_SDK)
    with ServeProcess(tmp_path, db, "--test-provider", launcher=launcher) as server:
        server.wait_line("curl ")  # the banner's last line
        lines = "".join(server.printed).splitlines()
    assert NOTE in lines, "\n".join(lines)
    assert not [line for line in lines if line.startswith("  MCP:")]
