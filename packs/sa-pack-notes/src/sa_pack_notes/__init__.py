"""The notes pack: an assistant keeping markdown notes behind an MCP server, with approvals.

* The notes live behind an MCP server (:mod:`sa_pack_notes.server`, started over stdio on first
  use and shared by every thread of the runtime). Its folder is the ``NOTES_DIR`` variable (set
  it in the instance env or the process environment).
* The prompt offers ``notes.list_notes``, ``notes.read_note`` and ``notes.write_note`` freely,
  and ``notes.delete_note`` only with human approval (``requires_approval`` in the prompt's tool
  config: the pack gates a tool it does not implement itself).
* ``publish_note`` is a native tool defined with ``requires_approval=True``: it copies a note
  into the thread's files under ``/published/`` once a human approves.

Importing this module does no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sa_core import (
    Pack,
    define_agent,
    define_mcp_server,
    define_model,
    define_prompt,
    define_tool,
)

if TYPE_CHECKING:
    from sa_core import ThreadState

__version__ = "0.1.0"

_METADATA: dict[str, Any] = {
    "package_name": "sa-pack-notes",
    "version": __version__,
    "author": "standard-agents contributors",
    "license": "Apache-2.0",
}

notes_server = define_mcp_server(
    name="notes",
    command=["python", "-m", "sa_pack_notes.server"],  # python: the runtime's interpreter
    env={"NOTES_DIR": "${NOTES_DIR}"},
    description="Markdown notes in the NOTES_DIR folder.",
    timeout=30,
)


class PublishArgs(BaseModel):
    """Arguments of ``publish_note``."""

    name: str = Field(description="The note to publish.")


async def publish_note(state: ThreadState, args: PublishArgs) -> str:
    """Copy a note into the thread's files under ``/published/`` (after human approval).

    Args:
        state: the thread.
        args: the note name.

    Returns:
        Where the note was published.
    """
    read = await state.invoke_tool("notes.read_note", {"name": args.name})
    if read.status != "success":
        raise ValueError(read.error or f"Could not read note {args.name!r}.")
    path = f"/published/{args.name}.md"
    await state.write_file(path, read.result or "", "text/markdown")
    return f"Published {args.name!r} at {path}."


tools = [
    define_tool(
        name="publish_note",
        description="Publish a note (copies it into this conversation's files). Needs approval.",
        args=PublishArgs,
        execute=publish_note,
        requires_approval=True,
    )
]

NOTES_PROMPT = """\
You keep the user's notes. Use notes_list_notes and notes_read_note to look, notes_write_note
to create or update a note, notes_delete_note to delete one and publish_note to publish one.
Deleting and publishing wait for a human to approve; if a call is denied, say so and ask what
to do instead. Answer in one or two sentences."""

models = [define_model(name="fast", provider="openai", model="gpt-4o-mini")]

prompts = [
    define_prompt(
        name="notes_main",
        model="fast",
        prompt=NOTES_PROMPT,
        include_chat=True,
        tools=[
            "notes.list_notes",
            "notes.read_note",
            "notes.write_note",
            {"name": "notes.delete_note", "requires_approval": True},
            "publish_note",
        ],
    )
]

notes_keeper = define_agent(
    name="notes_keeper",
    title="Notes",
    description="Keeps markdown notes; deleting and publishing need a human's approval.",
    side_a={"prompt": "notes_main"},
    **_METADATA,
)

pack = Pack(
    name="notes",
    agents=[notes_keeper],
    prompts=prompts,
    models=models,
    tools=tools,
    mcp_servers=[notes_server],
    version=__version__,
    author="standard-agents contributors",
    license="Apache-2.0",
    description="Notes behind an MCP server, with human approval before deleting or publishing.",
)

__all__ = ["PublishArgs", "notes_server", "pack", "publish_note"]
