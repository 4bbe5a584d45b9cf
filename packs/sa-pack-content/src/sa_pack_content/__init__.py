"""The content pack: reviewed content from a writer/editor subagent.

Agent graph::

    content_lead (ai_human)
     '-- article_writer (dual_ai; blocking, non-resumable; initUserMessageProperty "assignment")
           side A  Writer  save_draft, set_writing_status -> session_status
                           give_up                        -> session_fail
           side B  Editor  read_draft, check_style
                           publish                        -> session_stop (summary + draft file)
                           reject_draft                   -> session_fail

The content lead calls ``article_writer`` and waits: the tool result is the editor's summary,
the draft file copied into the lead's thread, and ``Reference: <uuid>``. While the child works,
the writer's status updates show in the lead's child registry (``thread.children``).

Importing this module does no I/O.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

if TYPE_CHECKING:
    from sa_core import ThreadState

__version__ = "0.1.0"

DRAFT_PATH = "/attachments/draft.md"
"""Where the writer's ``save_draft`` writes the draft (in the child thread)."""

DEFAULT_MAX_WORDS = "600"
"""The style guide's length limit; the ``MAX_WORDS`` variable overrides it."""

BANNED_PHRASES = ("very unique", "synergy", "leverage", "in order to", "at the end of the day")
"""Phrases the style guide refuses."""

MAX_SENTENCE_WORDS = 30
"""Sentences longer than this are flagged."""

_METADATA: dict[str, Any] = {
    "package_name": "sa-pack-content",
    "version": __version__,
    "author": "standard-agents contributors",
    "license": "Apache-2.0",
}

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------


class DraftArgs(BaseModel):
    """Arguments of ``save_draft``."""

    title: str = Field(description="The headline.")
    body: str = Field(description="The article body in Markdown.")


class StatusArgs(BaseModel):
    """Arguments of ``set_writing_status``."""

    status: str = Field(description="What you are doing now, e.g. 'outlining'.")


class ReasonArgs(BaseModel):
    """A reason, for ``give_up`` and ``reject_draft``."""

    reason: str = Field(description="Why the article cannot be delivered.")


class PublishArgs(BaseModel):
    """Arguments of ``publish``."""

    summary: str = Field(description="One or two sentences for the content lead.")
    files: list[str] = Field(
        default_factory=list, description=f"Files to deliver, normally ['{DRAFT_PATH}']."
    )


class PathArgs(BaseModel):
    """A file path."""

    path: str = Field(description="Absolute path, e.g. /attachments/draft-1a2b3c4d.md.")


async def save_draft(state: ThreadState, args: DraftArgs) -> str:
    """Write the draft to :data:`DRAFT_PATH` (replacing the previous one).

    Args:
        state: the writer's (child) thread.
        args: title and body.

    Returns:
        Where the draft is and how long it is.
    """
    text = f"# {args.title.strip()}\n\n{args.body.strip()}\n"
    await state.write_file(DRAFT_PATH, text, "text/markdown")
    return f"Draft saved to {DRAFT_PATH} ({len(args.body.split())} words)."


async def read_draft(state: ThreadState) -> str:
    """Read the current draft.

    Args:
        state: the editor's (child) thread.

    Returns:
        The draft text.

    Raises:
        FileNotFoundError: the writer has not saved a draft yet.
    """
    data = await state.read_file(DRAFT_PATH)
    if data is None:
        raise FileNotFoundError("No draft yet: ask the writer to save one with save_draft.")
    return data.decode("utf-8", errors="replace")


def style_problems(text: str, max_words: int) -> list[str]:
    """List the style guide's objections to a text.

    Args:
        text: the draft.
        max_words: the length limit.

    Returns:
        One line per problem; empty when the text passes.
    """
    problems: list[str] = []
    words = len(text.split())
    if words > max_words:
        problems.append(f"too long: {words} words (limit {max_words})")
    lowered = text.lower()
    problems += [f"banned phrase: {p!r}" for p in BANNED_PHRASES if p in lowered]
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        count = len(sentence.split())
        if count > MAX_SENTENCE_WORDS:
            problems.append(f"long sentence ({count} words): {sentence[:60]}...")
    return problems


async def check_style(state: ThreadState) -> str:
    """Check the current draft against the style guide.

    Args:
        state: the editor's (child) thread.

    Returns:
        ``Style check passed.`` or the list of problems.
    """
    text = await read_draft(state)
    limit = int(state.env_or_none("MAX_WORDS") or DEFAULT_MAX_WORDS)
    problems = style_problems(text, limit)
    if not problems:
        return "Style check passed."
    return "Style problems:\n" + "\n".join(f"- {p}" for p in problems)


def set_writing_status(state: ThreadState, args: StatusArgs) -> str:
    """Acknowledge a status; the ``session_status`` binding forwards it to the content lead.

    Args:
        state: the writer's thread.
        args: the status.

    Returns:
        An acknowledgement.
    """
    return f"Status: {args.status.strip()}"


def give_up(state: ThreadState, args: ReasonArgs) -> str:
    """End the session as failed from the writer's side (``session_fail``).

    Args:
        state: the writer's thread.
        args: the reason.

    Returns:
        An acknowledgement.
    """
    return "Assignment returned."


def publish(state: ThreadState, args: PublishArgs) -> str:
    """Accept the draft (``session_stop``); the runtime hands the files to the content lead.

    Args:
        state: the editor's thread.
        args: summary and files.

    Returns:
        An acknowledgement.
    """
    return "Published."


def reject_draft(state: ThreadState, args: ReasonArgs) -> str:
    """Refuse the assignment (``session_fail``).

    Args:
        state: the editor's thread.
        args: the reason.

    Returns:
        An acknowledgement.
    """
    return "Rejected."


async def read_attachment(state: ThreadState, args: PathArgs) -> str:
    """Read a text file of the content lead's thread (e.g. a delivered draft).

    Args:
        state: the lead's thread.
        args: the path.

    Returns:
        The file's text.

    Raises:
        FileNotFoundError: no file at that path.
    """
    data = await state.read_file(args.path)
    if data is None:
        raise FileNotFoundError(f"No file at {args.path}.")
    return data.decode("utf-8", errors="replace")


tools = [
    define_tool(
        name="save_draft",
        description=f"Save your draft to {DRAFT_PATH}.",
        args=DraftArgs,
        execute=save_draft,
    ),
    define_tool(
        name="set_writing_status",
        description="Tell the content lead what you are doing now.",
        args=StatusArgs,
        execute=set_writing_status,
    ),
    define_tool(
        name="give_up",
        description="Return the assignment: it cannot be written as asked.",
        args=ReasonArgs,
        execute=give_up,
    ),
    define_tool(name="read_draft", description="Read the current draft.", execute=read_draft),
    define_tool(
        name="check_style",
        description="Check the draft against the style guide (length, banned phrases).",
        execute=check_style,
        variables=[{"name": "MAX_WORDS", "description": "Length limit of an article."}],
    ),
    define_tool(
        name="publish",
        description="Accept the draft and deliver it to the content lead.",
        args=PublishArgs,
        execute=publish,
    ),
    define_tool(
        name="reject_draft",
        description="Refuse the assignment for good (not for fixable problems).",
        args=ReasonArgs,
        execute=reject_draft,
    ),
    define_tool(
        name="read_attachment",
        description="Read a delivered file.",
        args=PathArgs,
        execute=read_attachment,
    ),
]

# ---------------------------------------------------------------------------------------------
# Prompts and agents
# ---------------------------------------------------------------------------------------------

LEAD_PROMPT = """\
You are the content lead. You take article requests from the user, commission them from
article_writer (give it a complete assignment: topic, audience, length, angle) and wait for
the result. A delivered article comes back as a file path; read it with read_attachment and
show it to the user. If the writer fails, explain why and propose a changed assignment."""

WRITER_PROMPT = f"""\
You are a staff writer. You receive an assignment and write the article.
- Call set_writing_status when you start outlining, drafting or revising.
- Save every version with save_draft ({DRAFT_PATH}); then reply briefly that it is ready.
- Apply the editor's feedback and save again.
- If the assignment cannot be written (no facts, contradictory brief), call give_up."""

EDITOR_PROMPT = """\
You are the editor. Read the draft (read_draft) and run check_style.
- If it is accurate, on brief and passes the style check, call publish with a one or two
  sentence summary and files ["/attachments/draft.md"].
- If it needs work, reply with specific, numbered feedback.
- If the assignment itself is unworkable, call reject_draft with the reason."""

models = [
    define_model(name="writer", provider="openai", model="gpt-4o"),
    define_model(name="fast", provider="openai", model="gpt-4o-mini"),
]

prompts = [
    define_prompt(
        name="content_lead_main",
        model="fast",
        prompt=LEAD_PROMPT,
        include_chat=True,
        tools=[
            {"name": "article_writer", "blocking": True, "initUserMessageProperty": "assignment"},
            "read_attachment",
        ],
    ),
    define_prompt(
        name="writer_main",
        model="writer",
        prompt=WRITER_PROMPT,
        include_chat=True,
        tools=["save_draft", "set_writing_status", "give_up"],
    ),
    define_prompt(
        name="editor_main",
        model="writer",
        prompt=EDITOR_PROMPT,
        include_chat=True,
        tools=["read_draft", "check_style", "publish", "reject_draft"],
    ),
]

content_lead = define_agent(
    name="content_lead",
    title="Content lead",
    description="Commissions articles from a writer/editor pair and delivers them.",
    side_a={"prompt": "content_lead_main", "label": "Lead"},
    **_METADATA,
)

article_writer = define_agent(
    name="article_writer",
    type="dual_ai",
    title="Article writer",
    expose_as_tool=True,
    tool_description="Write an article from an assignment; an editor reviews it before delivery.",
    max_session_turns=12,  # turns of both sides: 6 drafts, 6 reviews
    env={"MAX_WORDS": DEFAULT_MAX_WORDS},
    side_a={
        "prompt": "writer_main",
        "label": "Writer",
        "session_status": {"name": "set_writing_status", "message_property": "status"},
        "session_fail": {"name": "give_up", "message_property": "reason"},
    },
    side_b={
        "prompt": "editor_main",
        "label": "Editor",
        "session_stop": {
            "name": "publish",
            "message_property": "summary",
            "attachments_property": "files",
        },
        "session_fail": {"name": "reject_draft", "message_property": "reason"},
    },
    **_METADATA,
)

pack = Pack(
    name="content",
    agents=[content_lead, article_writer],
    prompts=prompts,
    models=models,
    tools=tools,
    entry_agents=["content_lead"],
    version=__version__,
    author="standard-agents contributors",
    license="Apache-2.0",
    description="Reviewed content: a writer/editor subagent used by a content lead.",
)

__all__ = ["DRAFT_PATH", "article_writer", "content_lead", "pack", "style_problems"]
