"""Client tools: tools the sender of a message declares for its turn, run by the sender.

A client of a served protocol (the OpenAI ``tools``) or ``thread.send_message(...,
client_tools=[...], tool_choice=...)`` declares tools that the agent's model is offered for
that turn, beside the agent's own. They are kept in the user message's metadata
(``client_tools``, ``tool_choice``), as a per-turn ``output_schema`` is, and read by the flow
that runs the turn (:func:`turn_tools_of`); each top-level step adds them to what it offers
(:func:`offer`) and asks the model for the turn's ``tool_choice`` (:func:`choice_for`).

A call of a client tool does not run here: the approval gate records it as a pending call
(``client: true``) in the thread's approvals value and the turn parks with reason
``awaiting_client_tools`` once the step's other calls ran (the agent's own tools run on the
server as usual). :func:`submit` takes the results: it checks them against the pending calls and
queues them as a queue entry that is not a message (``sa:tool_results``), so that they wake the
thread on whichever worker holds it and survive a restart; the drain that takes the entry in
records them as the calls' decisions (:func:`take_results`, in its transaction), and the gate's
``settle`` stores each as its call's tool row and resumes the parked turn, whose model step then
sees the results.

``tool_choice``: ``auto`` (the prompt's own choice), ``none`` (no client tool is offered),
``required`` or ``{"name": tool}`` (a client tool). ``required`` and a named tool apply to the
first model step after the message (or after the results): later steps of the turn are ``auto``,
so a forced tool is called once and a turn never loops on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sa_core.engine.delivery import delivery
from sa_core.engine.messages import create_messages, new_message
from sa_core.engine.model.structured import FINAL_TOOL, RETRY_CALL
from sa_core.engine.tools import approvals
from sa_core.engine.tools.tools import LIFECYCLE_TOOLS, OfferedTool
from sa_core.errors import ClientToolResultsError, ClientToolsError
from sa_core.spec import QueueMessageInput
from sa_core.spec.schemas import EMPTY_OBJECT_SCHEMA, check_schema

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope
    from sa_core.spec import AgentDefinition, Message
    from sa_core.store import Transaction

TOOLS = "client_tools"
"""The user message's metadata key holding the turn's client tools."""
CHOICE = "tool_choice"
"""The user message's metadata key holding the turn's ``tool_choice``."""
RESULTS = "sa:tool_results"
"""Metadata key of the queue entry carrying client tool results (``{call_id: output}``)."""
OPTIONS = "client_options"
"""Key, in the approvals value, of the client tools the results ask the turn to go on with."""
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = frozenset({*LIFECYCLE_TOOLS, FINAL_TOOL, RETRY_CALL, "invalid_assistant_response"})
"""Tool names the engine may offer on its own: a client tool cannot take them."""
CHOICES = ("auto", "none", "required")
FIELDS = frozenset({"name", "description", "parameters", "strict"})


@dataclass(frozen=True, slots=True)
class TurnTools:
    """The client tools of a turn, as its steps offer them.

    Attributes:
        tools: the tools by name (``kind="client"``).
        choice: ``auto``, ``none``, ``required`` or ``{"name": tool}``.
    """

    tools: dict[str, OfferedTool]
    choice: str | dict[str, str]

    @property
    def forced(self) -> bool:
        """Whether the choice forces a call (``required`` or a named tool)."""
        return self.choice not in ("auto", "none")

    def relaxed(self) -> TurnTools:
        """The tools after the step a forced choice applied to: ``auto`` from then on."""
        return TurnTools(self.tools, "auto") if self.forced else self


def turn_tools_of(messages: Sequence[Message]) -> TurnTools | None:
    """The client tools of the last top-level user message of ``messages``, if it has any."""
    for message in reversed(messages):
        if message.role == "user" and message.depth == 0:
            return from_metadata(message.metadata)
    return None


def from_metadata(metadata: Mapping[str, Any] | None) -> TurnTools | None:
    """The client tools stored in a message's (or results') metadata, if any."""
    if not metadata:
        return None
    declared = metadata.get(TOOLS)
    if not declared:
        return None
    tools = {
        spec["name"]: OfferedTool(
            name=spec["name"],
            kind="client",
            description=spec.get("description") or "",
            parameters=spec.get("parameters") or dict(EMPTY_OBJECT_SCHEMA),
            strict=bool(spec.get("strict")),
        )
        for spec in declared
    }
    return TurnTools(tools, metadata.get(CHOICE) or "auto")


def offer(turn: TurnTools, offered: dict[str, OfferedTool]) -> None:
    """Add the turn's client tools to what a step offers (none for ``tool_choice: none``)."""
    if turn.choice == "none":
        return
    for name, tool in turn.tools.items():
        offered.setdefault(name, tool)  # the agent's own tool wins (checked when sent)


def choice_for(turn: TurnTools, prompt_choice: Any) -> Any:
    """The ``tool_choice`` of a step: the client's forced one, else the prompt's."""
    return prompt_choice if not turn.forced else turn.choice


# -- declaring ------------------------------------------------------------------------------


async def check(
    kernel: Kernel,
    thread: ThreadRef,
    tools: Sequence[Mapping[str, Any]] | None,
    choice: Any,
) -> dict[str, Any]:
    """The metadata that declares ``tools`` and ``choice`` for a turn of ``thread``.

    Raises:
        ClientToolsError: see :func:`check_for`; a subagent's thread takes none either.
    """
    scope, agent = kernel.scope_of(thread), kernel.agent_of(thread)
    subagent = thread.row.parent_id is not None
    return await check_for(kernel, scope, agent, tools, choice, subagent=subagent)


async def check_for(
    kernel: Kernel,
    scope: PackScope,
    agent: AgentDefinition,
    tools: Sequence[Mapping[str, Any]] | None,
    choice: Any,
    *,
    subagent: bool = False,
) -> dict[str, Any]:
    """The metadata that declares ``tools`` and ``choice`` for a turn of ``agent``.

    Needs no thread: the served protocols check a request before they start one.

    Raises:
        ClientToolsError: every problem at once: the agent turns client tools off
            (``serving.client_tools``), the thread is a subagent's, a tool is malformed or its
            name is one the agent's prompts offer, or ``choice`` names no declared tool.
    """
    problems: list[tuple[str, str]] = []
    if not agent.serving.client_tools and tools:
        problems.append(
            (TOOLS, f"agent '{agent.name}' does not take client tools (serving.client_tools "
             "is false); send the request without them.")
        )  # fmt: skip
    if subagent and tools:
        problems.append((TOOLS, "client tools are for top-level threads, not subagents."))
    specs = normalised(list(tools or []), problems)
    taken = await agent_tool_names(kernel, scope, agent) if specs else set()
    for index, spec in enumerate(specs):
        if spec["name"] in taken:
            problems.append(
                (f"{TOOLS}[{index}].name", f"'{spec['name']}' is the name of one of agent "
                 f"'{agent.name}''s own tools; rename the client tool.")
            )  # fmt: skip
    checked = checked_choice(choice, {s["name"] for s in specs}, problems)
    if problems:
        raise ClientToolsError(problems)
    metadata: dict[str, Any] = {TOOLS: specs} if specs else {}
    if specs or checked != "auto":
        metadata[CHOICE] = checked
    return metadata


def normalised(tools: list[Any], problems: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The declared tools as stored (``name``, ``description``, ``parameters``, ``strict``)."""
    specs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"{TOOLS}[{index}]"
        if not isinstance(tool, Mapping):
            problems.append((where, "expected an object with 'name' and 'parameters'."))
            continue
        for key in sorted(set(tool) - FIELDS):
            problems.append((f"{where}.{key}", "unknown field; use name, description, "
                             "parameters and strict."))  # fmt: skip
        name = tool.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            problems.append((f"{where}.name", "expected 1 to 64 letters, digits, '_' or '-'."))
            continue
        if name in seen:
            problems.append((f"{where}.name", f"'{name}' is declared twice."))
        seen.add(name)
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            problems.append((f"{where}.description", "expected a string."))
        parameters = tool.get("parameters")
        if parameters is None:
            parameters = dict(EMPTY_OBJECT_SCHEMA)
        elif not isinstance(parameters, dict):
            problems.append((f"{where}.parameters", "expected a JSON Schema object."))
        else:
            try:
                check_schema(parameters)
            except ValueError as exc:
                problems.append((f"{where}.parameters", f"{exc}."))
        strict = tool.get("strict")
        if strict is not None and not isinstance(strict, bool):
            problems.append((f"{where}.strict", "expected true or false."))
        spec = {"name": name, "description": description or "", "parameters": parameters}
        specs.append(spec | ({"strict": strict} if strict is not None else {}))
    return specs


def checked_choice(
    choice: Any, names: set[str], problems: list[tuple[str, str]]
) -> str | dict[str, str]:
    """``choice`` as stored: ``auto`` (also for ``None``), ``none``, ``required``, a name."""
    if choice is None or choice == "auto":
        return "auto"
    if choice == "none":
        return "none"
    if choice == "required":
        if not names:
            problems.append((CHOICE, "'required' needs at least one client tool."))
        return "required"
    if isinstance(choice, Mapping) and set(choice) == {"name"}:
        name = choice["name"]
        if name not in names:
            listed = ", ".join(sorted(names)) or "none"
            problems.append((CHOICE, f"names {name!r}, which is not a declared client tool "
                             f"(declared: {listed})."))  # fmt: skip
        return {"name": str(name)}
    problems.append((CHOICE, f"expected 'auto', 'none', 'required' or {{'name': tool}}, got "
                     f"{choice!r}."))  # fmt: skip
    return "auto"


async def agent_tool_names(kernel: Kernel, scope: PackScope, agent: AgentDefinition) -> set[str]:
    """Every name the agent's prompts (its sides') may offer, with the engine's reserved ones.

    A prompt's tools count whether or not their ``optional`` flag is on for a thread.
    """
    names = set(RESERVED)
    configs = [agent.side_a]
    if agent.type == "dual_ai" and agent.side_b is not None:
        configs.append(agent.side_b)
    for config in configs:
        prompt = scope.prompt(config.prompt)
        names.update(kernel.caches.tool_table(scope, prompt).tools)
        if scope.mcp_servers:
            names.update(await kernel.mcp.offered(scope, prompt))
    return names


# -- results --------------------------------------------------------------------------------


async def pending_calls(kernel: Kernel, thread_id: str) -> list[dict[str, Any]]:
    """The client tool calls of the thread awaiting a result, in the order the model made them.

    Each: ``tool_call_id``, ``name``, ``arguments`` (a dict) and ``requested_at``.
    """
    pending = await kernel.store.get_value(thread_id, approvals.KEY) or {}
    return [
        {k: entry[k] for k in ("tool_call_id", "name", "arguments", "requested_at")}
        for entry in pending.get("calls", {}).values()
        if entry.get("client") and entry.get("decision") is None
    ]


async def submit(
    kernel: Kernel,
    thread: ThreadRef,
    results: Mapping[str, Any],
    options: dict[str, Any] | None = None,
) -> None:
    """Queue the results of pending client calls; the parked turn goes on once all are in.

    ``results``: ``{tool_call_id: output}``, a string (anything else is sent as JSON).
    ``options``: the client tools to go on with (:func:`check`'s metadata), or ``None`` for the
    turn's own with ``tool_choice: auto``.

    Raises:
        ClientToolResultsError: an id that is not a client call awaiting a result (every one
            named), or no results at all.
    """
    outputs = await checked_outputs(kernel, thread.thread_id, results)
    metadata: dict[str, Any] = {RESULTS: outputs}
    if options is not None:
        metadata[OPTIONS] = options
    entry = QueueMessageInput(role="user", content="", silent=True, metadata=metadata)
    await delivery.enqueue(kernel, thread, entry)


async def refuse_while_awaited(kernel: Kernel, thread: ThreadRef) -> None:
    """Before a message is sent: refuse it while client calls of the thread await results.

    The turn that made them is parked mid-step: a message now would come between the calls
    and their results. A thread known to have no pending calls, whose row does not say it
    awaits client tools, costs no read.

    Raises:
        ClientToolResultsError: naming the calls that await their results.
    """
    thread_id = thread.thread_id
    parked = thread.row.execution.get("status") == approvals.CLIENT_STATUS
    if approvals.known_clear(kernel, thread_id) and not parked:
        return  # (the row says so too: another worker may have parked it since)
    pending = await kernel.store.get_value(thread_id, approvals.KEY)
    approvals.mark(kernel, thread_id, bool(pending))
    calls = (pending or {}).get("calls", {}).values()
    waiting = [c["tool_call_id"] for c in calls if c.get("client") and c["decision"] is None]
    if waiting:
        raise ClientToolResultsError(
            thread_id,
            [f"its turn awaits the results of client tool calls {', '.join(waiting)} before "
             "it takes a message; send them, or stop the thread to drop them"],
        )  # fmt: skip


async def checked_outputs(
    kernel: Kernel, thread_id: str, results: Mapping[str, Any]
) -> dict[str, str]:
    """The results as stored outputs, once each is known to answer a call awaiting it.

    Raises:
        ClientToolResultsError: see :func:`submit`.
    """
    waiting = {c["tool_call_id"] for c in await pending_calls(kernel, thread_id)}
    problems = [
        f"'{call_id}' is not a client tool call awaiting a result"
        for call_id in results
        if call_id not in waiting
    ]
    if not results:
        problems.append("no results were given")
    if problems:
        listed = ", ".join(sorted(waiting)) or "none"
        raise ClientToolResultsError(thread_id, [*problems, f"awaiting: {listed}"])
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in results.items()}


async def close(kernel: Kernel, thread: ThreadRef, results: Mapping[str, Any]) -> None:
    """Store results of pending client calls as their rows and end the parked turn there.

    No model step follows: the client took the calls' results as the turn's end (a forced
    tool's call that was the answer, say) and goes on with a new message. The rows and the
    calls leaving the approvals value commit together; once nothing is pending, the thread's
    status leaves ``awaiting_client_tools``.

    Raises:
        ClientToolResultsError: see :func:`submit`.
    """
    thread_id, store = thread.thread_id, kernel.store
    outputs = await checked_outputs(kernel, thread_id, results)
    pending = await store.get_value(thread_id, approvals.KEY) or {}
    calls: dict[str, Any] = pending.get("calls", {})
    rows = [
        new_message(
            thread_id, "tool", output, name=calls[call_id]["name"], tool_call_id=call_id,
            tool_status="success", metadata={approvals.CLIENT_RESULT: True},
        )
        for call_id, output in outputs.items()
    ]  # fmt: skip
    for call_id in outputs:
        calls.pop(call_id)
    async with store.transaction() as tx:
        await create_messages(kernel, thread, rows, tx=tx)
        if calls:
            await store.set_value(thread_id, approvals.KEY, pending, tx=tx)
        else:
            await store.delete_value(thread_id, approvals.KEY, tx=tx)
    approvals.mark(kernel, thread_id, bool(calls))
    row = kernel.threads.live_row(thread_id) or thread.row
    if not calls and row.execution.get("status") == approvals.CLIENT_STATUS:
        row.execution = {**row.execution, "status": "idle"}
        await store.update_thread(thread_id, execution=row.execution)


def results_of(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The client tool results a queue entry carries (its ``RESULTS`` metadata), or None."""
    if not metadata:
        return None
    results = metadata.get(RESULTS)
    return results if isinstance(results, dict) else None


async def take_results(
    kernel: Kernel, thread_id: str, metadata: Mapping[str, Any], tx: Transaction
) -> None:
    """Record a results entry's outputs as its calls' decisions, in the drain's ``tx``.

    A call no longer pending (answered by an earlier entry, or cancelled by a stop) is skipped.
    """
    results = results_of(metadata) or {}
    pending = await kernel.store.get_value(thread_id, approvals.KEY, tx=tx)
    calls = (pending or {}).get("calls", {})
    taken = False
    for call_id, output in results.items():
        entry = calls.get(call_id)
        if entry is not None and entry.get("client") and entry.get("decision") is None:
            entry["decision"] = {"output": output}
            taken = True
    if not taken:
        return
    options = metadata.get(OPTIONS)
    pending[OPTIONS] = options if options is not None else {CHOICE: "auto"}
    await kernel.store.set_value(thread_id, approvals.KEY, pending, tx=tx)
    approvals.mark_pending(kernel, thread_id)


def resumed_tools(turn: TurnTools | None, options: Mapping[str, Any] | None) -> TurnTools | None:
    """The client tools a parked turn goes on with.

    ``options``: what the results asked for (:data:`OPTIONS`): their tools (else the turn's)
    and their ``tool_choice``; ``None`` (an approval decided): the turn's tools, ``auto``.
    """
    if options is not None and options.get(TOOLS):
        return from_metadata(options)
    if turn is None:
        return None
    return TurnTools(turn.tools, (options or {}).get(CHOICE) or "auto")
