"""What a crash run counts: the durability guarantees checked against the ledger and the database.

See :mod:`crashpack.harness` for what each count means. :class:`Db` reads the run's database
(the SQLite file, or the workers' PostgreSQL); :func:`count` fills a :class:`Report`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashpack import ledger
from crashpack.clients import Load
from sa_core.engine.delivery.effects import MAX_EFFECT_ATTEMPTS
from sa_core.store.effects import INTERRUPTED_EFFECT as INTERRUPTED

COMMIT_WINDOW_US = 500_000
"""How soon after an effect's body ends its completion must be committed (0.5 s)."""

MUST_BE_ZERO = (
    "unanswered",
    "tools_rerun",
    "duplicate_children",
    "queue_lost",
    "queue_doubled",
    "blocking_failed_child_ok",
    "blocking_results_twice",
    "effects_lost",
    "effects_doubled",
)
"""The counts the engine's durability guarantees must keep at zero."""


@dataclass
class Report:
    """What a crash run found."""

    seed: int
    kills: int = 0
    aimed_kills: int = 0
    workers: int = 0
    lease_holder_kills: int = 0
    jobs_sent: int = 0
    acked: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    info: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    settled: bool = False
    unsettled: str = ""
    seconds: float = 0.0

    def format(self) -> str:
        """The report as printable lines."""
        lines = [
            f"crash run: seed={self.seed} workers={self.workers or 1} kills={self.kills} "
            "(aimed after a 202: "
            f"{self.aimed_kills}"
            + (f", holding a lease: {self.lease_holder_kills}" if self.workers else "")
            + f") jobs sent={self.jobs_sent} acknowledged={self.acked} "
            f"settled={self.settled} in {self.seconds:.1f}s",
        ]
        if not self.settled:
            lines.append(
                "  NOT SETTLED: the last server stopped making progress with work still owed ("
                f"{self.unsettled or 'the run ended before settling'}); what it still owed is "
                "counted below as unanswered or lost"
            )
        for name in MUST_BE_ZERO:
            lines.append(f"  {name:<28} {self.counts.get(name, 0):>6}")
        for name, value in sorted(self.info.items()):
            lines.append(f"  ({name:<26} {value:>6})")
        for name, items in sorted(self.examples.items()):
            if items:
                lines.append(f"  e.g. {name}: {', '.join(items[:3])}")
        return "\n".join(lines)


class Db:
    """Read-only queries on the run's database: the SQLite file, or the workers' PostgreSQL."""

    def __init__(self, url: str, sqlite_path: Path) -> None:
        self.url = url
        self.sqlite_path = sqlite_path
        self.postgres = url.startswith("postgresql")
        self._pg: Any = None
        self._sqlite: sqlite3.Connection | None = None

    def json(self, column: str, key: str) -> str:
        """SQL reading ``key`` of a JSON column as text."""
        if self.postgres:
            return f"({column}->>'{key}')"
        return f"json_extract({column}, '$.{key}')"

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Db]:
        """Run the block's queries on one connection."""
        if self.postgres:
            import asyncpg  # type: ignore[import-untyped]

            self._pg = await asyncpg.connect(self.url)
            try:
                yield self
            finally:
                await self._pg.close()
                self._pg = None
        else:
            with _database(self.sqlite_path) as connection:
                self._sqlite = connection
                try:
                    yield self
                finally:
                    self._sqlite = None

    async def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Every row of a query (inside :meth:`session`)."""
        if self._pg is not None:
            return [tuple(row) for row in await self._pg.fetch(sql)]
        assert self._sqlite is not None, "query outside Db.session()"
        return list(self._sqlite.execute(sql).fetchall())

    async def one(self, sql: str) -> tuple[Any, ...]:
        """The first row of a query."""
        return (await self.rows(sql))[0]


@contextlib.contextmanager
def _database(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        yield connection
    finally:
        connection.close()


async def answered_jobs(db: Db) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    rows = await db.rows(
        "SELECT thread_id, content FROM messages WHERE role = 'assistant' AND content LIKE 'done %'"
    )
    for thread_id, content in rows:  # one line "done <job>" per job a response answers
        for line in content.splitlines():
            if line.startswith("done "):
                found[thread_id].add(line[len("done ") :])
    return found


async def count(db: Db, ledger_path: Path, load: Load, report: Report) -> None:
    entries = ledger.read(str(ledger_path))
    answers = await answered_jobs(db)
    tool_rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for thread_id, call_id, created in await db.rows(
        "SELECT thread_id, tool_call_id, created_at FROM messages WHERE role = 'tool'"
    ):
        tool_rows[(thread_id, call_id)].append(created)
    children = await db.rows(
        "SELECT id, parent_id, created_at FROM threads WHERE parent_id IS NOT NULL"
    )
    first_user: dict[str, str] = {}
    for thread_id, content in await db.rows(
        "SELECT thread_id, content FROM messages WHERE role = 'user' ORDER BY seq"
    ):
        first_user.setdefault(thread_id, content or "")
    subagent_calls: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for thread_id, created, calls in await db.rows(
        "SELECT thread_id, created_at, tool_calls FROM messages "
        "WHERE role = 'assistant' AND tool_calls IS NOT NULL ORDER BY seq"
    ):
        for call in json.loads(calls) or []:
            name = (call.get("function") or {}).get("name") or call.get("name")
            if name in ("worker", "scout"):
                task = "blk" if name == "worker" else "bg"
                job = str(call.get("id", ""))[2:].rsplit("-", 1)[0]
                subagent_calls[thread_id].append((created, f"{task} {job}"))
    notes = Counter(
        (thread_id, content[len("note ") :])
        for thread_id, content in await db.rows(
            "SELECT thread_id, content FROM messages WHERE role = 'user' AND content LIKE 'note %'"
        )
    )
    results = Counter(
        (thread_id, meta_child)
        for thread_id, meta_child in await db.rows(
            f"SELECT thread_id, {db.json('meta', 'subagent_id')} FROM messages "
            f"WHERE {db.json('meta', 'subagent_event')} IN ('result', 'failure')"
        )
    )
    effect_rows = Counter(
        op
        for (op,) in await db.rows(
            f"SELECT {db.json('args', 'op')} FROM effects WHERE name = 'ledger_effect'"
        )
    )
    given_up_rows = {
        op
        for (op,) in await db.rows(
            f"SELECT {db.json('args', 'op')} FROM effects WHERE name = 'ledger_effect' "
            f"AND status = 'failed' AND error = '{INTERRUPTED}'"
        )
    }
    (queue_left,) = await db.one("SELECT COUNT(*) FROM queue")

    unanswered = [job for thread, job in load.acked if job not in answers.get(thread, set())]
    report.counts["unanswered"] = len(unanswered)
    report.examples["unanswered"] = unanswered

    rerun, interrupted_rerun = [], 0
    for entry in entries:
        if entry.event != "tool_start":
            continue
        stored = tool_rows.get((entry.thread_id, entry.call_id or ""), [])
        if any(created < entry.at_us for created in stored):
            rerun.append(entry.op)
        elif entry.attempt > 1:
            interrupted_rerun += 1
    report.counts["tools_rerun"] = len(rerun)
    report.examples["tools_rerun"] = rerun
    report.info["tool_executions"] = sum(1 for e in entries if e.event == "tool_start")
    report.info["interrupted_tools_rerun"] = interrupted_rerun

    tasks: dict[str, str] = {}
    for child_id, parent_id, created in children:
        first = first_user.get(child_id)
        if first is None:  # killed before its first message: the parent's latest subagent call
            earlier = [t for at, t in subagent_calls.get(parent_id, []) if at <= created]
            first = earlier[-1] if earlier else f"unattributed {child_id}"
        tasks[child_id] = first
    per_task = Counter(tasks.values())
    duplicates = {task: n for task, n in per_task.items() if n > 1}
    report.counts["duplicate_children"] = sum(n - 1 for n in duplicates.values())
    report.examples["duplicate_children"] = sorted(duplicates)
    report.info["child_threads"] = len(children)

    queued = {(e.thread_id, e.op) for e in entries if e.event == "note_queued"}
    expected_notes = queued | set(notes)
    notes_lost = [op for key in expected_notes if notes[key] == 0 for op in [key[1]]]
    notes_doubled = [key[1] for key in expected_notes if notes[key] > 1]
    background = [
        (parent_id, child_id)
        for child_id, parent_id, _ in children
        if tasks[child_id].startswith("bg ") and child_id in first_user
    ]
    results_lost = [child for parent, child in background if results[(parent, child)] == 0]
    results_doubled = [f"{child}" for (_, child), n in results.items() if n > 1]
    report.counts["queue_lost"] = len(notes_lost) + len(results_lost) + queue_left
    report.counts["queue_doubled"] = len(notes_doubled) + len(results_doubled)
    report.examples["queue_lost"] = notes_lost + results_lost
    report.examples["queue_doubled"] = notes_doubled + results_doubled
    report.info["notes_queued"] = len(expected_notes)
    report.info["background_results"] = len(background)

    scheduled = {e.op for e in entries if e.event == "effect_scheduled"} | set(effect_rows)
    finished = Counter(e.op for e in entries if e.event == "effect_end")
    starts = Counter(e.op for e in entries if e.event == "effect_start")
    ends: dict[str, list[int]] = defaultdict(list)
    start_times: dict[str, list[int]] = defaultdict(list)
    scheduled_at: dict[str, int] = {}
    for entry in entries:
        if entry.event == "effect_scheduled":
            scheduled_at.setdefault(entry.op, entry.at_us)
        elif entry.event == "effect_end":
            ends[entry.op].append(entry.at_us)
        elif entry.event == "effect_start":
            start_times[entry.op].append(entry.at_us)
    given_up = [
        op
        for op in scheduled
        if op in given_up_rows
        and finished[op] == 0
        and killed_in_each_run(start_times[op], load.kill_times_us, scheduled_at.get(op, 0))
    ]
    effects_lost = [op for op in scheduled if finished[op] == 0 and op not in given_up]
    effects_doubled, rerun_after_finish = [], 0
    for op in scheduled:
        if effect_rows[op] > 1:
            effects_doubled.append(op)
        elif finished[op] > 1:
            first_end = min(ends[op])
            if any(0 <= k - first_end <= COMMIT_WINDOW_US for k in load.kill_times_us):
                rerun_after_finish += 1
            else:
                effects_doubled.append(op)
    report.counts["effects_lost"] = len(effects_lost)
    report.counts["effects_doubled"] = len(effects_doubled)
    report.examples["effects_lost"] = effects_lost
    report.examples["effects_doubled"] = effects_doubled
    report.info["effects_scheduled"] = len(scheduled)
    report.info["effects_given_up"] = len(given_up)
    report.examples["effects_given_up"] = given_up
    report.info["effects_rerun_after_finish"] = rerun_after_finish
    report.info["effects_interrupted_rerun"] = sum(1 for op in starts if starts[op] > 1)
    report.info["effects_rerun_more_than_once"] = sum(1 for op in starts if starts[op] > 2)
    await _count_blocking(db, report, tasks, results)


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


async def _count_blocking(
    db: Db, report: Report, tasks: dict[str, str], notified: Counter[tuple[str, str]]
) -> None:
    """Blocking calls: answered with the child's result, failed for nothing, delivered twice.

    ``tasks`` maps each child thread to its task (``blk <job>`` for the blocking ``worker``);
    ``notified`` counts result and failure notifications per ``(parent, child)``.
    """
    outcomes: dict[str, dict[str, Any]] = {}
    parents: dict[str, str] = {}
    for child_id, parent_id, execution in await db.rows(
        "SELECT id, parent_id, execution FROM threads WHERE parent_id IS NOT NULL"
    ):
        parents[child_id] = parent_id
        outcome = (_json_value(execution) or {}).get("last_outcome")
        if isinstance(outcome, dict):
            outcomes[child_id] = outcome
    children_of: dict[str, list[str]] = defaultdict(list)
    for child_id, task in tasks.items():
        children_of[task].append(child_id)
    calls: dict[tuple[str, str], str] = {}
    for thread_id, calls_json in await db.rows(
        "SELECT thread_id, tool_calls FROM messages "
        "WHERE role = 'assistant' AND tool_calls IS NOT NULL"
    ):
        for call in _json_value(calls_json) or []:
            name = (call.get("function") or {}).get("name") or call.get("name")
            if name == "worker":
                call_id = str(call.get("id", ""))
                calls[(thread_id, call_id)] = call_id[2:].rsplit("-", 1)[0]
    rows: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for thread_id, call_id, status, content in await db.rows(
        "SELECT thread_id, tool_call_id, tool_status, content FROM messages WHERE role = 'tool'"
    ):
        if (thread_id, call_id) in calls:
            rows[(thread_id, call_id)].append((status or "", content or ""))
    answered, failed_ok, twice, failed = 0, [], [], 0
    for (thread_id, call_id), job in calls.items():
        results = rows.get((thread_id, call_id), [])
        mine = [c for c in children_of.get(f"blk {job}", []) if parents.get(c) == thread_id]
        if any(s == "success" and c.startswith(f"child {job} done") for s, c in results):
            answered += 1
        if any(s == "error" for s, _ in results):
            failed += 1
            if any(outcomes.get(c, {}).get("failed") is False for c in mine):
                failed_ok.append(job)
        deliveries = len(results) + sum(notified[(thread_id, c)] for c in mine)
        if deliveries > 1:
            twice.append(job)
    report.counts["blocking_failed_child_ok"] = len(failed_ok)
    report.counts["blocking_results_twice"] = len(twice)
    report.examples["blocking_failed_child_ok"] = failed_ok
    report.examples["blocking_results_twice"] = twice
    report.info["blocking_calls"] = len(calls)
    report.info["blocking_answered_with_child_result"] = answered
    report.info["blocking_failed"] = failed


def killed_in_each_run(starts: list[int], kills_us: list[int], since_us: int) -> bool:
    """Whether kills account for every run of an effect that was given up as interrupted.

    Each run the ledger saw must be cut off by a kill (after its start, before the next one).
    A run the ledger never saw was killed between the engine committing its start and the
    effect's first line, which writes the ledger: so there must be a kill for every run,
    ``MAX_EFFECT_ATTEMPTS`` of them, after the effect was scheduled.
    """
    if len(starts) > MAX_EFFECT_ATTEMPTS:
        return False
    bounds = [*sorted(starts), float("inf")]
    if not all(any(bounds[i] < k < bounds[i + 1] for k in kills_us) for i in range(len(starts))):
        return False
    return sum(1 for k in kills_us if k > since_us) >= MAX_EFFECT_ATTEMPTS
