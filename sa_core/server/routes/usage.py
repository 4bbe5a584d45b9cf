"""``GET threads/{id}/usage``: tokens, cost and model calls of a thread and its subagent tree."""

from __future__ import annotations

from litestar import Controller, get
from litestar.params import FromQuery

from sa_core.server.context import ThreadDep
from sa_core.server.errors import errors
from sa_core.server.schemas import Base, convert


class UsageTotalsOut(Base, kw_only=True):
    """Token counts, cost (USD) and model calls."""

    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    cost_usd: float
    model_calls: int
    failed_model_calls: int


class UsageSummaryOut(UsageTotalsOut, kw_only=True):
    """Totals and the same per model definition name."""

    by_model: dict[str, UsageTotalsOut]


class ThreadUsageOut(Base, kw_only=True):
    """A thread's own usage and, with ``include_descendants``, its whole subtree's."""

    thread_id: str
    thread: UsageSummaryOut
    tree: UsageSummaryOut | None = None
    descendant_count: int | None = None


class UsageController(Controller):
    """Usage of a thread (from its logs)."""

    path = "/threads"

    @get("/{thread_id:str}/usage", responses=errors(404), summary="Read a thread's usage")
    async def get_usage(
        self, thread: ThreadDep, include_descendants: FromQuery[bool] = True
    ) -> ThreadUsageOut:
        """Input, output, reasoning, cache-read and cache-write tokens, cost and calls, by model.

        ``thread`` covers the thread's own model calls; ``tree`` (unless
        ``include_descendants=false``) covers it plus every descendant subagent thread.
        """
        usage = await thread.usage(include_descendants=include_descendants)
        return convert(usage.model_dump(mode="json"), ThreadUsageOut)
