"""What the engine's lower groups see of a running flow: :class:`FlowView`.

The turn loop's own class (:class:`sa_core.engine.turn.flow.Flow`) lives above the tools, model,
remote, delivery and subagent modules; they take this protocol instead, so that they import
nothing above them (``tests/test_architecture.py``, ``LAYERS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from sa_core.engine.flowtypes import ExecutionView, PendingHandoff, SessionOutcome, StopReason
from sa_core.spec import Message, Side, ToolCall

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.registry import PackScope
    from sa_core.spec import AgentDefinition, PromptDefinition, SideConfig
    from sa_core.store import Transaction
    from sa_core.store.execution_record import ResumePoint
    from sa_core.store.rows import QueueEntry


class FlowView(ExecutionView, Protocol):
    """A running flow (:class:`sa_core.engine.turn.flow.Flow`): the public view and the step state.

    The members are the flow's; their meaning is documented there.
    """

    kernel: Kernel
    thread: ThreadRef
    state: Any
    depth: int
    parent_message_id: str | None
    prompt_override: PromptDefinition | None
    side_steps: dict[Side, int]
    queued_tools: list[tuple[str, dict[str, Any]]]
    pending_handoff: PendingHandoff | None
    queued_entries: list[QueueEntry] | None
    end_reason: StopReason | None
    outcome: SessionOutcome | None
    settled_queue: list[QueueEntry] | None
    messages: list[Message]
    last_text: str
    durable: bool
    since: int
    turns: dict[Side, int]
    prepared: Message | None
    partial: list[str]
    unanswered: list[ToolCall]
    sole_call: str | None
    row_settled: StopReason | None
    turn_schema: dict[str, Any] | None
    turn_settings: dict[str, Any] | None

    @property
    def scope(self) -> PackScope:
        """The package the owning agent lives in."""
        ...

    def read_turn(self, messages: Sequence[Message]) -> None:
        """Take the turn's options from its user message."""
        ...

    def resume_point(self, step_message_id: str | None = None) -> ResumePoint:
        """Where the flow stands now."""
        ...

    async def save_point(self, point: ResumePoint, *, tx: Transaction | None = None) -> None:
        """Store ``point`` as the thread's resume point (a durable flow only)."""
        ...

    def remember(self, message: Message) -> None:
        """Add a message created during this flow to the live history."""
        ...

    def resume_turn(self, pending: dict[str, Any]) -> None:
        """Back in a parked turn: the turn's options again."""
        ...

    def side_config(self, side: Side, agent: AgentDefinition | None = None) -> SideConfig | None:
        """The acting side's config, or None when a human takes that side."""
        ...

    def settles_in_step(self) -> bool:
        """Whether the flow's settlement is written in the commit of its step."""
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

    async def end_session(self, outcome: SessionOutcome) -> None:
        """End the session with ``outcome``."""
        ...


def flow_of(thread: ThreadRef) -> FlowView | None:
    """The flow ``thread`` runs in, else ``None`` (outside a turn).

    A handle's ``execution`` is typed as the public view; the engine only ever sets it to its
    own flow (:class:`sa_core.engine.turn.flow.Flow`), which is a :class:`FlowView`.
    """
    return cast("FlowView | None", thread.execution)
