"""Usage aggregates: the ``llm_call`` logs of a thread, or of its whole tree, summed by model.

One prepared statement per shape: with ``tree`` a recursive CTE collects the thread and its
descendants and one aggregate reads their logs. Rows are grouped by (the thread's own or not,
model); :mod:`sa_core.engine.model.usage` turns them into summaries and budgets.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Integer, and_, bindparam, case, func, literal_column, select
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.fast import Prepared
from sa_core.store.storebase import StoreBase
from sa_core.store.threads import descendants

USAGE_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "cost_usd",
    "model_calls",
    "failed_model_calls",
)
"""The summed columns of a usage row (besides ``own``, 1 for the thread's own logs, and ``m``,
the model definition name): the fields of :class:`sa_core.engine.model.usage.UsageTotals`."""
_STATEMENTS: dict[bool, Prepared] = {}


def _statement(tree: bool) -> Prepared:
    """The grouped aggregate over a thread's (or its tree's) ``llm_call`` logs, built once."""
    found = _STATEMENTS.get(tree)
    if found is not None:
        return found

    logs = t.logs.c
    data = logs.data
    root = bindparam("root", type_=t.threads.c.id.type)

    def number(key: str, kind: Any) -> Any:
        return func.coalesce(func.sum(func.coalesce(data[key].as_float(), 0)), 0).cast(kind)

    failed = and_(data["error"].as_string().is_not(None), data["error"].as_string() != "")
    own = case((logs.thread_id == root, 1), else_=0).label("own")
    model = func.coalesce(data["model_name"].as_string(), data["model"].as_string()).label("m")
    columns = [
        own,
        model,
        number("input_tokens", Integer).label("input_tokens"),
        number("output_tokens", Integer).label("output_tokens"),
        number("reasoning_tokens", Integer).label("reasoning_tokens"),
        number("cached_tokens", Integer).label("cached_tokens"),
        number("cache_write_tokens", Integer).label("cache_write_tokens"),
        number("cost_total", Float).label("cost_usd"),
        func.sum(case((failed, 0), else_=1)).label("model_calls"),
        func.sum(case((failed, 1), else_=0)).label("failed_model_calls"),
    ]
    if tree:
        threads = t.threads.c
        members = (
            select(threads.id.label("id")).where(threads.id == root).cte("tree", recursive=True)
        )
        members = members.union_all(select(threads.id).where(threads.parent_id == members.c.id))
        where: Any = logs.thread_id.in_(select(members.c.id))
    else:
        where = logs.thread_id == root
    stmt = (
        select(*columns)
        .where(logs.type == "llm_call", where)
        .group_by(literal_column("own"), literal_column("m"))
    )
    found = Prepared(stmt, columns)
    _STATEMENTS[tree] = found
    return found


class UsageMixin(StoreBase):
    """Usage rows of a thread or of its tree."""

    async def usage_rows(
        self, thread_id: str, *, tree: bool, count_descendants: bool = False
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The usage rows of a thread (``tree``: of it and every descendant), in one read.

        Args:
            thread_id: The thread (the root of the tree with ``tree``).
            tree: Sum the logs of the thread's descendants too.
            count_descendants: Also count the thread's descendants, in the same read.

        Returns:
            The rows (``own``, ``m`` and :data:`USAGE_COLUMNS`), and the number of descendants
            (``None`` unless counted).
        """

        def op(conn: Connection) -> tuple[list[dict[str, Any]], int | None]:
            rows = _statement(tree).rows(conn, {"root": thread_id})
            count = len(descendants(conn, thread_id)) if count_descendants else None
            return rows, count

        return await self._read(op)
