"""The notes MCP server: markdown notes in one folder, spoken to over stdio.

Written with the MCP Python SDK (``MCPServer``, formerly ``FastMCP``). Run it with
``python -m sa_pack_notes.server``; ``NOTES_DIR`` names the folder (created when missing).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes", log_level="ERROR")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,63}$")


def _folder() -> Path:
    folder = Path(os.environ.get("NOTES_DIR") or ".sa/notes")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _path(name: str) -> Path:
    if not _NAME.match(name):
        raise ToolError(
            f"Invalid note name {name!r}: use 1-64 letters, digits, spaces, '_' or '-'."
        )
    return _folder() / f"{name}.md"


@server.tool(description="List the names of all notes.")
def list_notes() -> str:
    """List notes."""
    names = sorted(p.stem for p in _folder().glob("*.md"))
    return "\n".join(names) if names else "(no notes)"


@server.tool(description="Read a note by name.")
def read_note(name: str) -> str:
    """Read a note."""
    path = _path(name)
    if not path.exists():
        raise ToolError(f"No note named {name!r}; list_notes shows the existing ones.")
    return path.read_text(encoding="utf-8")


@server.tool(description="Create or replace a note.")
def write_note(name: str, text: str) -> str:
    """Write a note."""
    _path(name).write_text(text, encoding="utf-8")
    return f"Saved note {name!r} ({len(text)} characters)."


@server.tool(description="Delete a note by name.")
def delete_note(name: str) -> str:
    """Delete a note."""
    path = _path(name)
    if not path.exists():
        raise ToolError(f"No note named {name!r}.")
    path.unlink()
    return f"Deleted note {name!r}."


if __name__ == "__main__":
    server.run("stdio")
