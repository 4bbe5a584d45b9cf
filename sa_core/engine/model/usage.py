"""Usage over a thread and its subagent tree, and the budgets that cap it.

Usage comes from the ``llm_call`` log rows every model attempt writes (tokens, cost). The totals
of a thread and all its descendants are one prepared statement of the store
(:meth:`~sa_core.store.usage.UsageMixin.usage_rows`): a recursive CTE collects the tree's thread
ids and one aggregate over their logs groups them by model (the budget check runs just that;
``thread_usage`` adds one count of descendants). Nothing is kept in memory, so usage and budgets
survive a restart.

Budgets are variables, resolved like any env value and inherited down the tree: a thread's own
env (or its user, instance, agent and prompt sources), else the nearest ancestor thread that sets
it on its env or its agent.

- ``SA_MAX_COST_USD``: the most the whole tree (from its root) may spend, in USD.
- ``SA_MAX_TOKENS``: the most input + output tokens the whole tree may use.

Before each model call the flow checks the root's rolled-up usage; an exhausted budget stops the
turn with reason ``budget_exceeded``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sa_core.engine.flowtypes import SIDE_ROLE, SessionOutcome
from sa_core.engine.messages import create_message, new_message
from sa_core.spec.base import DEFERRED

if TYPE_CHECKING:
    from sa_core.engine.flowview import ModelFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.store import Store

MAX_COST = "SA_MAX_COST_USD"
MAX_TOKENS = "SA_MAX_TOKENS"
BUDGET_VARIABLES = (MAX_COST, MAX_TOKENS)


class UsageTotals(BaseModel):
    """Token counts, cost and model calls.

    ``input_tokens`` counts every prompt token; of those, ``cached_tokens`` were read from the
    provider's prompt cache and ``cache_write_tokens`` written to it. ``cost_usd`` prices each
    kind at the model's price for it (``cached_price``, ``cache_write_price``).
    """

    model_config = DEFERRED

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = Field(0, description="Input tokens read from the prompt cache.")
    cache_write_tokens: int = Field(0, description="Input tokens written to the prompt cache.")
    cost_usd: float = 0.0
    model_calls: int = Field(0, description="Successful model calls.")
    failed_model_calls: int = Field(0, description="Model attempts that failed.")

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, other: UsageTotals) -> None:
        """Add another total into this one."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost_usd += other.cost_usd
        self.model_calls += other.model_calls
        self.failed_model_calls += other.failed_model_calls


class UsageSummary(UsageTotals):
    """Totals, and the same broken down by model definition name."""

    by_model: dict[str, UsageTotals] = Field(default_factory=dict)


class ThreadUsage(BaseModel):
    """A thread's own usage and, when asked, its usage with every descendant."""

    model_config = DEFERRED

    thread_id: str
    thread: UsageSummary
    tree: UsageSummary | None = None
    descendant_count: int | None = None


_COUNTS = tuple(name for name in UsageTotals.model_fields if name != "cost_usd")
"""The integer totals, named as the columns of the store's usage rows."""


def _summaries(rows: list[dict[str, Any]]) -> tuple[UsageSummary, UsageSummary]:
    """(the thread's own summary, the summary of every row) of the store's usage rows."""
    mine, everyone = UsageSummary(), UsageSummary()
    for row in rows:
        totals = UsageTotals(
            **{name: (row[name] or 0) for name in _COUNTS},
            cost_usd=float(row["cost_usd"] or 0.0),
        )
        model = str(row["m"] or "unknown")
        targets = [everyone, mine] if row["own"] else [everyone]
        for summary in targets:
            summary.add(totals)
            summary.by_model.setdefault(model, UsageTotals()).add(totals)
    for summary in (mine, everyone):
        summary.cost_usd = round(summary.cost_usd, 10)
        for totals in summary.by_model.values():
            totals.cost_usd = round(totals.cost_usd, 10)
    return mine, everyone


async def thread_usage(
    store: Store, thread_id: str, *, include_descendants: bool = True
) -> ThreadUsage:
    """Usage of a thread and (by default) of it plus every descendant, by model."""
    rows, count = await store.usage_rows(
        thread_id, tree=include_descendants, count_descendants=include_descendants
    )
    mine, everyone = _summaries(rows)
    if not include_descendants:
        return ThreadUsage(thread_id=thread_id, thread=mine)
    return ThreadUsage(thread_id=thread_id, thread=mine, tree=everyone, descendant_count=count)


async def tree_totals(store: Store, root: str) -> UsageSummary:
    """The rolled-up usage of a root and all its descendants (one prepared statement)."""
    rows, _ = await store.usage_rows(root, tree=True)
    return _summaries(rows)[1]


async def _ancestry(kernel: Kernel, thread: ThreadRef) -> list[Any]:
    """The thread's row, then each ancestor's, up to the root."""
    rows = [thread.row]
    seen = {thread.thread_id}
    parent = thread.row.parent_id
    while parent is not None and parent not in seen:
        # a live row is kept current by every write of this process (no read per step)
        row = kernel.threads.live_row(parent) or await kernel.store.get_thread(parent)
        if row is None:
            break
        seen.add(parent)
        rows.append(row)
        parent = row.parent_id
    return rows


def _defined_on(kernel: Kernel, row: Any, name: str) -> str | None:
    """A variable set on an ancestor thread, or on its agent definition."""
    if name in (row.env or {}):
        return str(row.env[name])
    scope = kernel.registry.scopes.get(row.package)
    agent = scope.agents.get(row.agent_id) if scope is not None else None
    if agent is not None and name in agent.env:
        return str(agent.env[name])
    return None


def _parse(name: str, value: str) -> float | None:
    try:
        limit = float(value)
    except ValueError:
        return None
    return limit if limit >= 0 else None


def _unbudgeted(kernel: Kernel, thread: ThreadRef) -> bool:
    """Whether no budget can apply: a top-level thread whose variables set none."""
    if thread.row.parent_id is not None:
        return False
    for name in BUDGET_VARIABLES:  # noqa: SIM110 (asked before every model call: no generator)
        if kernel.env_of(thread, name):
            return False
    return True


async def budget_exhausted(kernel: Kernel, thread: ThreadRef) -> str | None:
    """A sentence naming the exhausted budget, or ``None`` when the tree may call a model."""
    if _unbudgeted(kernel, thread):
        return None
    rows = await _ancestry(kernel, thread)
    limits: dict[str, float] = {}
    for name in BUDGET_VARIABLES:
        value = kernel.env_of(thread, name)
        for row in rows[1:] if value is None else []:
            value = _defined_on(kernel, row, name)
            if value is not None:
                break
        if value is not None and (parsed := _parse(name, str(value))) is not None:
            limits[name] = parsed
    if not limits:
        return None
    root = rows[-1].id
    tree = await tree_totals(kernel.store, root)
    where = "this thread" if root == thread.thread_id else f"its root thread {root}"
    if MAX_COST in limits and tree.cost_usd >= limits[MAX_COST]:
        return (
            f"Budget exceeded: {MAX_COST} is {limits[MAX_COST]:g} USD and the thread tree of "
            f"{where} has spent {tree.cost_usd:.6f} USD. Raise {MAX_COST} to continue."
        )
    if MAX_TOKENS in limits and tree.total_tokens >= limits[MAX_TOKENS]:
        return (
            f"Budget exceeded: {MAX_TOKENS} is {limits[MAX_TOKENS]:g} and the thread tree of "
            f"{where} has used {tree.total_tokens} tokens. Raise {MAX_TOKENS} to continue."
        )
    return None


async def stop_for_budget(flow: ModelFlow, side: str) -> bool:
    """Before a model call: when a budget is exhausted, record it and end the session.

    Stores an assistant row (status ``failed``, so it never enters a later context) whose content
    names the budget, and ends the session as failed, so a child's parent receives the failure
    notification with the same text.

    Returns:
        Whether the flow must stop with reason ``budget_exceeded``.
    """
    if _unbudgeted(flow.kernel, flow.thread):  # the common case, without a coroutine
        return False
    text = await budget_exhausted(flow.kernel, flow.thread)
    if text is None:
        return False

    row = new_message(
        flow.thread.thread_id,
        SIDE_ROLE[side],  # type: ignore[index]
        text,
        status="failed",
        depth=flow.depth,
        parent_id=flow.parent_message_id,
        metadata={"error": text, "stop_reason": "budget_exceeded"},
    )
    flow.remember(await create_message(flow.kernel, flow.thread, row))
    await flow.kernel.log(flow.thread.thread_id, "budget_exceeded", {"message": text})
    await flow.end_session(SessionOutcome("budget_exceeded", failed=True, content=text))
    return True
