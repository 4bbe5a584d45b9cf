"""What the engine's lower groups see of a running flow: one small protocol each.

The turn loop's own class (:class:`sa_core.engine.turn.flow.Flow`) lives above the tools, model,
remote, delivery, subagent and worker modules; they take these protocols instead, so that they
import nothing above them (``tests/test_architecture.py``, ``LAYERS``). Each names only what its
users read, as read-only members: a change of the flow's step state is a method of the flow (the
architecture test fails on an assignment to a flow's attribute outside ``engine/turn``).

- :class:`FlowHome`, :class:`FlowScratch`: the kernel and thread, with the scratch dict (a
  run-agent request taken by the drain).
- :class:`FlowPlace`: where a flow's messages go (:mod:`sa_core.engine.messages`, the
  compaction summary).
- :class:`ModelFlow`: the model group (budget, compaction, structured output).
- :class:`SettlingFlow`: what a flow's settlement writes (:mod:`sa_core.engine.turn.running`,
  the scheduler, the child report).
- :class:`SubagentFlow`: the subagent group (spawning, variables, run-agent requests).
- :class:`RemoteFlow`: a remote agent's step.
- :class:`ToolFlow`: the tool rows and the approval gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from sa_core.engine.flowtypes import SessionOutcome, StopReason
from sa_core.spec import Message, Side, ToolCall

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope
    from sa_core.spec import AgentDefinition, PromptDefinition, SideConfig
    from sa_core.store.rows import QueueEntry


class FlowHome(Protocol):
    """The kernel and the thread a flow runs on (members as in :class:`~.turn.flow.Flow`)."""

    @property
    def kernel(self) -> Kernel:
        """The engine's kernel."""
        ...

    @property
    def thread(self) -> ThreadRef:
        """The thread the flow runs on."""
        ...


class FlowPlace(FlowHome, Protocol):
    """Where a flow runs and its messages go."""

    @property
    def depth(self) -> int:
        """0 for a thread's flow, more for a subprompt's."""
        ...

    @property
    def parent_message_id(self) -> str | None:
        """The message a subprompt's flow answers, if it is one."""
        ...

    def remember(self, message: Message) -> None:
        """Add a message created during this flow to the live history."""
        ...


class ModelFlow(FlowPlace, Protocol):
    """What the model group reads of a flow, and the two changes it makes."""

    @property
    def messages(self) -> list[Message]:
        """The flow's live history."""
        ...

    @property
    def prompt_override(self) -> PromptDefinition | None:
        """The prompt a subprompt's flow runs, if it is one."""
        ...

    @property
    def scope(self) -> PackScope:
        """The package the owning agent lives in."""
        ...

    @property
    def converter(self) -> Any:
        """Its converter of messages (it also keeps the recorder's running hash)."""
        ...

    def log_prepared(self, log_id: str) -> None:
        """Link the model call in flight's message to its request log."""
        ...

    async def end_session(self, outcome: SessionOutcome) -> None:
        """End the session with ``outcome``."""
        ...


class SettlingFlow(FlowHome, Protocol):
    """What a flow's settlement writes: its side, counts, end and a child's outcome."""

    @property
    def current_side(self) -> Side:
        """The side acting now."""
        ...

    @property
    def turns(self) -> dict[Side, int]:
        """Completed turns per side in the current session."""
        ...

    @property
    def end_reason(self) -> StopReason | None:
        """Why the flow stopped, once it ran."""
        ...

    @property
    def outcome(self) -> SessionOutcome | None:
        """How the session ended, if it did."""
        ...


class FlowScratch(FlowHome, Protocol):
    """A flow's home and its scratch dict (a handoff's immediates, a run-agent request)."""

    @property
    def context(self) -> dict[str, Any]:
        """The flow's scratch dict."""
        ...


class SubagentFlow(FlowScratch, Protocol):
    """What the subagent group reads of a parent's flow."""

    @property
    def current_side(self) -> Side:
        """The side acting now."""
        ...

    @property
    def messages(self) -> list[Message]:
        """The flow's live history."""
        ...

    @property
    def outcome(self) -> SessionOutcome | None:
        """How the session ended, if it did."""
        ...


class RemoteFlow(ModelFlow, SettlingFlow, Protocol):
    """What a remote agent's step reads of a flow, and how it settles it."""

    def settles_in_step(self) -> bool:
        """Whether the flow's settlement is written in the commit of its step."""
        ...

    def settled_in_commit(self, queue: list[QueueEntry], reason: StopReason | None = None) -> None:
        """The flow settled in a step's commit that read ``queue``."""
        ...


class ToolFlow(RemoteFlow, SubagentFlow, Protocol):
    """What the tool rows and the approval gate read of a flow, and the changes they make."""

    @property
    def durable(self) -> bool:
        """Whether the flow keeps the thread's execution record."""
        ...

    @property
    def state(self) -> Any:
        """The thread's facade user code gets."""
        ...

    @property
    def partial(self) -> list[str]:
        """Text streamed by the model call in flight."""
        ...

    @property
    def sole_call(self) -> str | None:
        """The id of the running step's only tool call."""
        ...

    @property
    def unanswered(self) -> list[ToolCall]:
        """Tool calls of the running step without a stored row yet."""
        ...

    def answered(self, call_id: str) -> None:
        """The call ``call_id`` is no longer awaited."""
        ...

    def answered_all(self) -> None:
        """No call of the step waits for a row any more."""
        ...

    def take_prepared(self) -> Message | None:
        """The model call in flight's message, handed over once."""
        ...

    def restore_session(self, kept: tuple[SessionOutcome | None, dict[Side, int]]) -> None:
        """Undo an ended session whose commit rolled back."""
        ...

    def ended_by(self, reason: str) -> None:
        """Record why the flow ended."""
        ...

    def act_as(self, side: Side) -> None:
        """Make ``side`` the acting side now."""
        ...

    def reload_turn(self, turn: Sequence[Message]) -> None:
        """Put a parked turn's stored messages back in front of the live history."""
        ...

    def resume_turn(self, pending: dict[str, Any]) -> None:
        """Back in a parked turn: the turn's options again."""
        ...

    def side_config(self, side: Side, agent: AgentDefinition | None = None) -> SideConfig | None:
        """The acting side's config, or None when a human takes that side."""
        ...

    async def run_call(
        self,
        call: ToolCall,
        offered: dict[str, Any],
        config: SideConfig,
        *,
        allow_any: bool = False,
        attempt: int = 1,
    ) -> Message | None:
        """Run one tool call of this flow (``offered``: name to offered tool)."""
        ...

    async def end_session_on(self, row: Message, reason: str) -> None:
        """End the session on a tool row's result."""
        ...


def flow_of(thread: ThreadRef) -> ToolFlow | None:
    """The flow ``thread`` runs in, else ``None`` (outside a turn).

    A handle's ``execution`` is typed as what user code and the handle read of it; the engine
    only ever sets it to its own flow (:class:`sa_core.engine.turn.flow.Flow`), which is a
    :class:`ToolFlow` (and every other protocol here).
    """
    return cast("ToolFlow | None", thread.execution)
