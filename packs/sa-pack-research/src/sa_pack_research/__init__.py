"""The research pack: a coordinator with a resumable research subagent and a blocking QA subagent.

Agent graph::

    coordinator (ai_human)
     |-- researcher   (dual_ai; resumable, non-blocking; via subagent_create / subagent_message)
     |     side A  worker    -> report_progress = session_status
     |     side B  reviewer  -> approve_research = session_stop (summary + notes attachment)
     |                          reject_research  = session_fail
     '-- fact_checker (dual_ai; blocking, non-resumable; the tool call waits for the verdict)
           side A  analyst   -> analyze_draft
           side B  judge     -> qa_pass = session_stop, qa_fail = session_fail

The coordinator writes a brief to ``/attachments/brief.md`` and passes it to a researcher
instance; the attachment is copied into the child's filesystem. The worker writes
``/attachments/notes.md`` in its own thread; when the reviewer approves, the notes are copied
back into the coordinator's thread and the coordinator is notified with a silent message.

Importing this module does no I/O: every definition is data.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

if TYPE_CHECKING:
    from sa_core import ThreadState

__version__ = "0.1.0"

BRIEF_PATH = "/attachments/brief.md"
"""Where the coordinator's ``save_brief`` writes the brief."""

NOTES_PATH = "/attachments/notes.md"
"""Where the research worker's ``write_notes`` writes its notes (in the child thread)."""

MAX_READ_CHARS = 20_000
"""``read_attachment`` returns at most this many characters."""

_METADATA: dict[str, Any] = {
    "package_name": "sa-pack-research",
    "version": __version__,
    "author": "standard-agents contributors",
    "license": "Apache-2.0",
}

# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------

smart = define_model(name="smart", provider="openai", model="gpt-4o")
fast = define_model(name="fast", provider="openai", model="gpt-4o-mini")

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------


class SaveBriefArgs(BaseModel):
    """Arguments of ``save_brief``."""

    content: str = Field(description="The brief in Markdown: question, scope, expected output.")


class PathArgs(BaseModel):
    """A file path in the thread's filesystem."""

    path: str = Field(description="Absolute path, e.g. /attachments/notes.md.")


class SearchArgs(BaseModel):
    """Arguments of ``search_attachments``."""

    pattern: str = Field(description="A regular expression (or plain text) to look for.")


class NotesArgs(BaseModel):
    """Arguments of ``write_notes``."""

    content: str = Field(description="Markdown notes; every claim next to its source.")
    append: bool = Field(default=False, description="Append instead of replacing the notes.")


class StatusArgs(BaseModel):
    """Arguments of ``report_progress``."""

    status: str = Field(description="A short status line, e.g. 'reading the brief'.")


class ApproveArgs(BaseModel):
    """Arguments of ``approve_research``."""

    summary: str = Field(description="Two to four sentences: what the notes establish.")
    attachments: list[str] = Field(
        default_factory=list, description=f"Files to hand back, normally ['{NOTES_PATH}']."
    )


class RejectArgs(BaseModel):
    """Arguments of ``reject_research``."""

    reason: str = Field(description="Why the task cannot be done with the material provided.")


class DraftArgs(BaseModel):
    """Arguments of ``analyze_draft``."""

    text: str = Field(description="The full draft to analyse.")


class VerdictArgs(BaseModel):
    """Arguments of ``qa_pass``."""

    verdict: str = Field(description="A one-line verdict.")


class ProblemsArgs(BaseModel):
    """Arguments of ``qa_fail``."""

    problems: str = Field(description="The blocking problems, one per line.")


async def save_brief(state: ThreadState, args: SaveBriefArgs) -> str:
    """Write the research brief to :data:`BRIEF_PATH`.

    Args:
        state: the coordinator's thread.
        args: the brief.

    Returns:
        Where the brief was written.
    """
    record = await state.write_file(BRIEF_PATH, args.content, "text/markdown")
    return (
        f"Saved the brief to {record.path} ({record.size} bytes). Pass this path in the "
        f"attachments of subagent_create."
    )


async def read_attachment(state: ThreadState, args: PathArgs) -> str:
    """Read a text file of the thread.

    Args:
        state: the calling thread.
        args: the path.

    Returns:
        The file's text, cut at :data:`MAX_READ_CHARS` characters.

    Raises:
        FileNotFoundError: no file at that path (the model sees the message).
    """
    data = await state.read_file(args.path)
    if data is None:
        raise FileNotFoundError(f"No file at {args.path}. Use list_attachments to see the files.")
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_READ_CHARS:
        return text[:MAX_READ_CHARS] + f"\n[... cut at {MAX_READ_CHARS} characters]"
    return text


async def list_attachments(state: ThreadState) -> str:
    """List the files under ``/attachments/`` with their sizes.

    Args:
        state: the calling thread.

    Returns:
        One ``path (size bytes)`` per line, or a note that there are none.
    """
    records = [r for r in await state.find_files("/attachments/**") if not r.is_directory]
    if not records:
        return "No files under /attachments/."
    return "\n".join(f"{r.path} ({r.size} bytes)" for r in records)


async def search_attachments(state: ThreadState, args: SearchArgs) -> str:
    """Search the thread's text files line by line.

    Args:
        state: the calling thread.
        args: the pattern.

    Returns:
        ``path:line: text`` for every match, or a note that nothing matched.
    """
    results = await state.grep_files(args.pattern)
    lines = [
        f"{result.path}:{number}: {match.strip()}"
        for result in results
        for number, match in zip(result.line_numbers, result.matches, strict=False)
    ]
    return "\n".join(lines) if lines else f"No match for {args.pattern!r}."


async def write_notes(state: ThreadState, args: NotesArgs) -> str:
    """Write (or append to) the research notes at :data:`NOTES_PATH`.

    Args:
        state: the research child's thread.
        args: the notes and whether to append.

    Returns:
        Where the notes are and how large they are now.
    """
    content = args.content
    if args.append:
        existing = await state.read_file(NOTES_PATH)
        if existing:
            content = existing.decode("utf-8", errors="replace").rstrip("\n") + "\n\n" + content
    record = await state.write_file(NOTES_PATH, content, "text/markdown")
    return f"Notes saved to {record.path} ({record.size} bytes)."


def report_progress(state: ThreadState, args: StatusArgs) -> str:
    """Acknowledge a status update; the ``session_status`` binding forwards it to the parent.

    Args:
        state: the research child's thread.
        args: the status.

    Returns:
        An acknowledgement.
    """
    return f"Status set: {args.status.strip()}"


def approve_research(state: ThreadState, args: ApproveArgs) -> str:
    """End the research session successfully (``session_stop``).

    The runtime maps ``summary`` to the result and copies ``attachments`` to the parent.

    Args:
        state: the research child's thread.
        args: the summary and files.

    Returns:
        An acknowledgement.
    """
    return "Research approved."


def reject_research(state: ThreadState, args: RejectArgs) -> str:
    """End the research session with a failure (``session_fail``).

    Args:
        state: the research child's thread.
        args: the reason.

    Returns:
        An acknowledgement.
    """
    return "Research rejected."


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NUMBER = re.compile(r"\d")
_SOURCE = re.compile(r"\[\d+\]|\(source:|https?://|/attachments/", re.IGNORECASE)
_VAGUE = re.compile(r"\b(many|some|often|experts say|it is said|studies show)\b", re.IGNORECASE)


def analyze_draft(state: ThreadState, args: DraftArgs) -> dict[str, Any]:
    """Find checkable weaknesses in a draft: unsourced numbers and vague claims.

    Args:
        state: the QA child's thread.
        args: the draft.

    Returns:
        ``{words, sentences, unsourced_numbers, vague_claims}`` (sentences listed verbatim).
    """
    sentences = [s.strip() for s in _SENTENCE.split(args.text.strip()) if s.strip()]
    return {
        "words": len(args.text.split()),
        "sentences": len(sentences),
        "unsourced_numbers": [s for s in sentences if _NUMBER.search(s) and not _SOURCE.search(s)],
        "vague_claims": [s for s in sentences if _VAGUE.search(s)],
    }


def qa_pass(state: ThreadState, args: VerdictArgs) -> str:
    """Accept the draft (``session_stop``).

    Args:
        state: the QA child's thread.
        args: the verdict.

    Returns:
        An acknowledgement.
    """
    return "Draft passed."


def qa_fail(state: ThreadState, args: ProblemsArgs) -> str:
    """Refuse the draft (``session_fail``).

    Args:
        state: the QA child's thread.
        args: the problems.

    Returns:
        An acknowledgement.
    """
    return "Draft failed."


tools = [
    define_tool(
        name="save_brief",
        description="Save the research brief to /attachments/brief.md.",
        args=SaveBriefArgs,
        execute=save_brief,
    ),
    define_tool(
        name="read_attachment",
        description="Read a text file, e.g. /attachments/notes.md.",
        args=PathArgs,
        execute=read_attachment,
    ),
    define_tool(
        name="list_attachments",
        description="List the files under /attachments/.",
        execute=list_attachments,
    ),
    define_tool(
        name="search_attachments",
        description="Search the text files for a pattern.",
        args=SearchArgs,
        execute=search_attachments,
    ),
    define_tool(
        name="write_notes",
        description=f"Write your research notes to {NOTES_PATH}.",
        args=NotesArgs,
        execute=write_notes,
    ),
    define_tool(
        name="report_progress",
        description="Tell the coordinator what you are doing now.",
        args=StatusArgs,
        execute=report_progress,
    ),
    define_tool(
        name="approve_research",
        description="Approve the notes and end the research.",
        args=ApproveArgs,
        execute=approve_research,
    ),
    define_tool(
        name="reject_research",
        description="End the research: the task cannot be done.",
        args=RejectArgs,
        execute=reject_research,
    ),
    define_tool(
        name="analyze_draft",
        description="List unsourced numbers and vague claims.",
        args=DraftArgs,
        execute=analyze_draft,
    ),
    define_tool(name="qa_pass", description="Pass the draft.", args=VerdictArgs, execute=qa_pass),
    define_tool(
        name="qa_fail",
        description="Fail the draft with its blocking problems.",
        args=ProblemsArgs,
        execute=qa_fail,
    ),
]

# ---------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------

COORDINATOR_PROMPT = f"""\
You are the research coordinator. You turn a user's question into a checked, sourced answer.

How you work:
1. Write a short brief with save_brief: the question, the scope, what a good answer contains.
2. Start a researcher with subagent_create: agent "researcher", a short unique name for the
   topic, the instruction as message, and ["{BRIEF_PATH}"] as attachments. It works in the
   background: tell the user the research has started and end your turn.
3. A message "Subagent (reference: ...) has returned the following result" brings the
   summary and the path of the notes file it returned. Read the notes with read_attachment.
4. To follow up on the same topic, use subagent_message with that reference instead of
   creating another researcher: it keeps its notes and history.
5. Before you answer, call fact_checker with your full draft. It waits for a verdict; fix
   every problem it reports, then give the user the answer.

Write plain prose and say which notes each claim comes from."""

WORKER_PROMPT = f"""\
You are a research worker. You receive a research task, usually with a brief under /attachments/.

- Read what you were given: list_attachments, read_attachment, search_attachments.
- Call report_progress with a short status whenever you start a new phase.
- Write your findings as Markdown with write_notes (saved to {NOTES_PATH}). Keep every claim
  next to its source (file and line).
- When the notes are ready, reply with one short message saying so. A reviewer reads them and
  approves them or sends feedback; apply feedback by rewriting the notes."""

REVIEWER_PROMPT = f"""\
You are the research reviewer. The worker writes notes to {NOTES_PATH}; you check them before
they go back to the coordinator.

- Read the notes with read_attachment.
- If they answer the task and every claim cites a source, call approve_research with a two to
  four sentence summary and attachments ["{NOTES_PATH}"].
- If they can be fixed, reply with concrete feedback; the worker revises.
- If the task cannot be done with the material provided, call reject_research with the reason."""

ANALYST_PROMPT = """\
You are a QA analyst. You receive a draft answer. Run analyze_draft on the full draft, then
reply with a short list of issues: unsourced numbers, vague claims, contradictions. Reply
"No issues found." when there are none."""

JUDGE_PROMPT = """\
You are the QA judge. Decide from the analyst's findings whether the draft may be shown.
- Call qa_pass with a one-line verdict when no blocking issue remains.
- Call qa_fail with the blocking problems when the draft must be rewritten.
- Reply with a question to the analyst only when the findings are unclear."""

prompts = [
    define_prompt(
        name="coordinator_main",
        model="smart",
        prompt=COORDINATOR_PROMPT,
        include_chat=True,
        tools=[
            "save_brief",
            "read_attachment",
            {
                "name": "researcher",
                "blocking": False,
                "resumable": {"receives_messages": "side_a", "maxInstances": 3},
            },
            {"name": "fact_checker", "blocking": True, "initUserMessageProperty": "draft"},
        ],
    ),
    define_prompt(
        name="research_worker",
        model="fast",
        prompt=WORKER_PROMPT,
        include_chat=True,
        tools=[
            "list_attachments",
            "read_attachment",
            "search_attachments",
            "write_notes",
            "report_progress",
        ],
    ),
    define_prompt(
        name="research_reviewer",
        model="smart",
        prompt=REVIEWER_PROMPT,
        include_chat=True,
        tools=["read_attachment", "approve_research", "reject_research"],
    ),
    define_prompt(
        name="qa_analyst",
        model="fast",
        prompt=ANALYST_PROMPT,
        include_chat=True,
        tools=["analyze_draft"],
    ),
    define_prompt(
        name="qa_judge",
        model="smart",
        prompt=JUDGE_PROMPT,
        include_chat=True,
        tools=["qa_pass", "qa_fail"],
    ),
]

# ---------------------------------------------------------------------------------------------
# Agents
# ---------------------------------------------------------------------------------------------

coordinator = define_agent(
    name="coordinator",
    title="Research coordinator",
    description="Plans research, delegates it to researchers and checks answers before replying.",
    side_a={"prompt": "coordinator_main", "label": "Coordinator"},
    **_METADATA,
)

researcher = define_agent(
    name="researcher",
    type="dual_ai",
    title="Researcher",
    expose_as_tool=True,
    tool_description="Research a topic from the attached brief and return reviewed notes.",
    max_session_turns=16,  # turns of both sides: 8 rounds of work and review
    side_a={
        "prompt": "research_worker",
        "label": "Worker",
        "session_status": {"name": "report_progress", "message_property": "status"},
    },
    side_b={
        "prompt": "research_reviewer",
        "label": "Reviewer",
        "session_stop": {
            "name": "approve_research",
            "message_property": "summary",
            "attachments_property": "attachments",
        },
        "session_fail": {"name": "reject_research", "message_property": "reason"},
    },
    **_METADATA,
)

fact_checker = define_agent(
    name="fact_checker",
    type="dual_ai",
    title="Fact checker",
    expose_as_tool=True,
    tool_description="Check a draft for unsourced numbers and vague claims; waits for a verdict.",
    max_session_turns=8,  # turns of both sides: 4 rounds
    side_a={"prompt": "qa_analyst", "label": "Analyst"},
    side_b={
        "prompt": "qa_judge",
        "label": "Judge",
        "session_stop": {"name": "qa_pass", "message_property": "verdict"},
        "session_fail": {"name": "qa_fail", "message_property": "problems"},
    },
    **_METADATA,
)

pack = Pack(
    name="research",
    agents=[coordinator, researcher, fact_checker],
    prompts=prompts,
    models=[smart, fast],
    tools=tools,
    entry_agents=["coordinator"],
    version=__version__,
    author="standard-agents contributors",
    license="Apache-2.0",
    description="A research coordinator with a resumable research subagent and a QA subagent.",
)

__all__ = [
    "BRIEF_PATH",
    "NOTES_PATH",
    "coordinator",
    "fact_checker",
    "pack",
    "researcher",
]
