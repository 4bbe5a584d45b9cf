"""TrialView: a trial's stored thread tree, read from the store, that expectations score.

Everything here is a read of stored rows (messages, tool rows, the subagent registry, files,
``llm_call`` usage), so scoring a stored run again gives the same view without running the
agent. Tool calls exclude the session-binding tools of the agents (``session_stop``,
``session_fail``, ``session_status``, ``stop_tool``) and the structured-output tool
``final_answer``: they end or annotate a turn, they are not the agent's work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sa_core.runtime import Runtime
    from sa_core.spec import Message
    from sa_core.state import ThreadState

STRUCTURED_OUTPUT_TOOL = "final_answer"
DONE_TOOL = "eval_user_done"
GIVE_UP_TOOL = "eval_user_give_up"
SIM_PREFIX = "eval_user__"
"""The simulated user's tools and agent-name prefix (:mod:`sa_core.evals.simulate` uses these)."""
MESSAGE_PAGE = 10_000


class TreeUsage(Protocol):
    """The usage figures a trial is scored on (``state.usage().tree``: the budgets' figures)."""

    @property
    def input_tokens(self) -> int:
        """Input tokens."""
        ...

    @property
    def output_tokens(self) -> int:
        """Output tokens."""
        ...

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        ...

    @property
    def cost_usd(self) -> float:
        """USD."""
        ...

    @property
    def model_calls(self) -> int:
        """Successful model calls."""
        ...

    @property
    def failed_model_calls(self) -> int:
        """Model attempts that failed."""
        ...


@dataclass(frozen=True)
class CallView:
    """One tool call as stored: its name, arguments, result and whether it succeeded."""

    name: str
    arguments: dict[str, Any]
    id: str = ""
    result: str | None = None
    ok: bool = True
    message_id: str = ""


@dataclass
class ChildView:
    """A subagent thread of the target: its agent, mode, status, and its own tool calls."""

    agent: str
    name: str
    thread_id: str
    path: str
    blocking: bool | None
    resumable: bool | None
    status: str
    tool_calls: list[CallView] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)

    @property
    def mode(self) -> str:
        """``resumable``, ``blocking`` or ``non_blocking``."""
        if self.resumable:
            return "resumable"
        return "blocking" if self.blocking else "non_blocking"


@dataclass
class TrialView:
    """A trial as stored: messages, tool calls by thread path, children, files, usage, outcome.

    Attributes:
        thread_id: the trial's (target) thread.
        case_id: the case it ran.
        trial: its index among the case's trials (0-based).
        messages: the target thread's messages, oldest first (silent ones included).
        tool_calls: calls by thread path: ``"/"`` the target thread, ``"/<agent>"`` a child
            (``"/<agent>#2"`` its second instance), deeper children under their parent.
        children: every descendant thread, in creation order.
        files: the target thread's file paths (files only, no directories).
        usage: tokens, cost and model calls over the whole tree (the budgets' figures).
        latency_s: seconds from the trial's first message to its last, over the tree.
        turns: model calls over the tree.
        status: ``completed``, ``failed``, ``stopped``, ``terminated`` or ``awaiting_approval``.
        outcome: ``success`` (a session_stop binding ended it), ``failure`` (session_fail or
            its turn limit), else ``None``.
        error: why the trial could not run, if it could not.
    """

    thread_id: str
    case_id: str
    trial: int
    messages: list[Message]
    tool_calls: dict[str, list[CallView]]
    children: list[ChildView]
    files: list[str]
    usage: TreeUsage
    latency_s: float
    turns: int
    status: str
    outcome: str | None
    error: str | None = None
    state: ThreadState | None = field(default=None, repr=False)

    @property
    def calls(self) -> list[CallView]:
        """The target thread's own tool calls."""
        return self.tool_calls.get("/", [])

    @property
    def final(self) -> str:
        """The text of the agent's last answer (``""`` when it gave none)."""
        for message in reversed(self.messages):
            if message.role == "assistant" and message.content and not message.tool_calls:
                return message.content
        return ""

    @property
    def output(self) -> Any:
        """The structured output of the last answer that has one, else ``None``."""
        for message in reversed(self.messages):
            if message.role == "assistant" and message.metadata and "output" in message.metadata:
                return message.metadata["output"]
        return None

    @property
    def cost_usd(self) -> float:
        """USD over the tree: the sum of its stored model-call costs."""
        return float(self.usage.cost_usd)

    async def read_file(self, path: str) -> bytes | None:
        """The bytes of a file of the target thread, or ``None``."""
        if self.state is None:
            return None
        return await self.state.read_file(path)

    def transcript(self, limit: int = 12_000) -> str:
        """The conversation as text (roles, answers and tool calls), for a judge."""
        lines = []
        for message in self.messages:
            if message.role == "tool":
                lines.append(f"[tool result {message.name}] {message.content or ''}")
                continue
            text = message.content or ""
            calls = ", ".join(f"{c.name}({c.function.arguments})" for c in message.tool_calls or [])
            lines.append(f"{message.role}: {text}" + (f" [calls: {calls}]" if calls else ""))
        text = "\n".join(lines)
        return text if len(text) <= limit else text[-limit:]


def skipped_tools(runtime: Runtime, package: str) -> frozenset[str]:
    """Names not counted as calls: every session binding and stop tool, and ``final_answer``."""
    names = {STRUCTURED_OUTPUT_TOOL, DONE_TOOL, GIVE_UP_TOOL}
    scope = runtime.registry.scopes.get(package)
    for agent in scope.agents.values() if scope is not None else ():
        for _, side in agent.sides():
            names.update(side.session_tool_names())
            if side.stop_tool:
                names.add(side.stop_tool)
    return frozenset(names)


def calls_of(
    messages: list[Message], skip: frozenset[str], roles: tuple[str, ...]
) -> list[CallView]:
    """The tool calls made on ``roles`` messages, each with its result row's outcome."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    calls = []
    for message in messages:
        if message.role not in roles:
            continue
        for call in message.tool_calls or []:
            if call.name in skip:
                continue
            row = results.get(call.id)
            calls.append(
                CallView(
                    name=call.name,
                    arguments=call.arguments,
                    id=call.id,
                    result=row.content if row is not None else None,
                    ok=row is None or row.tool_status != "error",
                    message_id=message.id,
                )
            )
    return calls


async def thread_messages(state: ThreadState) -> list[Message]:
    """Every stored message of a thread, oldest first, silent ones included."""
    page = await state.get_messages(limit=MESSAGE_PAGE, include_silent=True)
    return list(page.messages)


def session_bindings(runtime: Runtime, state: ThreadState) -> tuple[set[str], set[str]]:
    """The names of the thread agent's ``session_stop`` and ``session_fail`` tools.

    A simulated user's agent exists only while its run runs: its bindings are the eval's own.
    """
    scope = runtime.registry.scopes.get(state.package)
    agent = scope.agents.get(state.agent_id) if scope is not None else None
    if agent is None:
        sim = state.agent_id.startswith(SIM_PREFIX)
        return ({DONE_TOOL}, {GIVE_UP_TOOL}) if sim else (set(), set())
    stops = {s.session_stop.name for _, s in agent.sides() if s.session_stop}
    fails = {s.session_fail.name for _, s in agent.sides() if s.session_fail}
    return stops, fails


def session_outcome(messages: list[Message], runtime: Runtime, state: ThreadState) -> str | None:
    """``success`` / ``failure`` from the session binding that ended the session, if any.

    A ``dual_ai`` session that hit its turn limit without either binding is a ``failure``.
    """
    stops, fails = session_bindings(runtime, state)
    ok = {m.tool_call_id for m in messages if m.role == "tool" and m.tool_status != "error"}
    outcome = None
    for message in messages:
        for call in message.tool_calls or []:
            if call.id in ok and call.name in stops:
                outcome = "success"
            elif call.id in ok and call.name in fails:
                outcome = "failure"
    if outcome is None and (stops or fails):
        limited = any("max_session_turns" in str(m.metadata or "") for m in messages)
        outcome = "failure" if limited else None
    return outcome


def thread_status(
    state: ThreadState, messages: list[Message], error: str | None, awaiting: bool = False
) -> str:
    """How the trial's thread stands.

    ``terminated``, ``stopped``, ``failed`` (an error, a failed answer), ``awaiting_approval``
    (tool calls wait for a person) or ``completed``.
    """
    if error:
        return "failed"
    if state.terminated is not None:
        return "terminated"
    if state.row.stopped:
        return "stopped"
    answers = [m for m in messages if m.role in ("assistant", "user") and m.status is not None]
    if answers and answers[-1].status == "failed":
        return "failed"
    return "awaiting_approval" if awaiting else "completed"


def latency_of(messages: list[Message]) -> float:
    """Seconds between the first and the last stored message."""
    times = [t for m in messages for t in (m.created_at, m.response_completed_at or 0) if t]
    return (max(times) - min(times)) / 1_000_000 if times else 0.0


async def load_view(
    runtime: Runtime,
    thread_id: str,
    *,
    case_id: str = "",
    trial: int = 0,
    error: str | None = None,
) -> TrialView:
    """Read a trial's tree from the store.

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    state = await runtime.get_thread(thread_id)
    skip = skipped_tools(runtime, state.package)
    messages = await thread_messages(state)
    tool_calls = {"/": calls_of(messages, skip, ("assistant",))}
    children: list[ChildView] = []
    await _collect_children(runtime, thread_id, "", skip, children)
    every = list(messages)
    for child in children:
        tool_calls[child.path] = child.tool_calls
        every.extend(child.messages)
    usage = await state.usage()
    tree = usage.tree if usage.tree is not None else usage.thread
    files = [f.path for f in await state.find_files("/**") if not f.is_directory]
    return TrialView(
        thread_id=thread_id,
        case_id=case_id,
        trial=trial,
        messages=messages,
        tool_calls=tool_calls,
        children=children,
        files=files,
        usage=tree,
        latency_s=latency_of(every),
        turns=tree.model_calls + tree.failed_model_calls,
        status=thread_status(state, messages, error, bool(await state.pending_approvals())),
        outcome=session_outcome(messages, runtime, state),
        error=error,
        state=state,
    )


async def _collect_children(
    runtime: Runtime, parent_id: str, prefix: str, skip: frozenset[str], into: list[ChildView]
) -> None:
    """Depth first: every descendant of ``parent_id`` with its path, mode and tool calls."""
    rows, _ = await runtime.store.list_threads(parent_id=parent_id, limit=10_000)
    entries = {e.reference: e for e in await runtime.store.list_children(parent_id)}
    seen: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: r.created_at):
        seen[row.agent_id] = seen.get(row.agent_id, 0) + 1
        suffix = f"#{seen[row.agent_id]}" if seen[row.agent_id] > 1 else ""
        path = f"{prefix}/{row.agent_id}{suffix}"
        entry = entries.get(row.id)
        child_state = await runtime.get_thread(row.id)
        messages = await thread_messages(child_state)
        into.append(
            ChildView(
                agent=row.agent_id,
                name=entry.name if entry is not None else row.agent_id,
                thread_id=row.id,
                path=path,
                blocking=entry.blocking if entry is not None else None,
                resumable=entry.resumable if entry is not None else None,
                status=entry.status if entry is not None else "unknown",
                tool_calls=calls_of(messages, skip, ("assistant", "user")),
                messages=messages,
            )
        )
        await _collect_children(runtime, row.id, path, skip, into)
