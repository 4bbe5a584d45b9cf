"""Eval runs, trials and the eval cache, as stored (:mod:`sa_core.store.evaltables`).

A run row is written when the run starts (``running``) and again when it finishes; each trial
row commits as soon as its trial is scored, so a run interrupted half way keeps what it did.
Writes are delete-then-insert in one transaction (portable across SQLite and PostgreSQL).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection

from sa_core.store.clock import now_us
from sa_core.store.evaltables import eval_cache, eval_runs, eval_trials
from sa_core.store.storebase import StoreBase

_R = eval_runs.c
_T = eval_trials.c
_C = eval_cache.c


class EvalsMixin(StoreBase):
    """Eval runs and their trials; the eval cache of model answers."""

    async def save_eval_run(
        self,
        run_id: str,
        *,
        suite: str,
        target: str,
        status: str,
        summary: dict[str, Any] | None = None,
        document: dict[str, Any] | None = None,
        created_at: int | None = None,
    ) -> None:
        """Create or replace a run's row (``finished_at`` set unless ``running``)."""
        now = now_us()

        def op(conn: Connection) -> None:
            old = conn.execute(select(_R.created_at).where(_R.id == run_id)).scalar()
            conn.execute(delete(eval_runs).where(_R.id == run_id))
            conn.execute(
                insert(eval_runs).values(
                    id=run_id,
                    suite=suite,
                    target=target,
                    status=status,
                    created_at=created_at or old or now,
                    finished_at=None if status == "running" else now,
                    summary=summary,
                    document=document,
                )
            )

        await self._write(op)

    async def save_eval_trial(
        self,
        run_id: str,
        case_id: str,
        trial: int,
        *,
        thread_id: str | None,
        passed: bool,
        score: float,
        result: dict[str, Any],
    ) -> None:
        """Create or replace one trial's row (a rescore replaces its scores)."""
        key = (_T.run_id == run_id) & (_T.case_id == case_id) & (_T.trial == trial)

        def op(conn: Connection) -> None:
            conn.execute(delete(eval_trials).where(key))
            conn.execute(
                insert(eval_trials).values(
                    run_id=run_id,
                    case_id=case_id,
                    trial=trial,
                    thread_id=thread_id,
                    passed=passed,
                    score=score,
                    result=result,
                    created_at=now_us(),
                )
            )

        await self._write(op)

    async def list_eval_runs(
        self,
        *,
        suite: str | None = None,
        package: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """Runs, newest first (without their trials), and how many there are.

        ``package``: only runs whose target is an agent of that package.
        """
        where = [_R.suite == suite] if suite is not None else []
        if package is not None:
            where.append(_R.target.startswith(f"{package}/", autoescape=True))
        columns = [_R.id, _R.suite, _R.target, _R.status, _R.created_at, _R.finished_at, _R.summary]
        page = select(*columns).where(*where).order_by(_R.created_at.desc(), _R.id.desc())
        count = select(func.count()).select_from(eval_runs).where(*where)

        def op(conn: Connection) -> tuple[list[dict[str, Any]], int]:
            rows = conn.execute(page.limit(limit).offset(offset)).mappings()
            return [dict(r) for r in rows], int(conn.execute(count).scalar() or 0)

        return await self._read(op)

    async def get_eval_run(self, run_id: str) -> dict[str, Any] | None:
        """A run's row with ``trials`` (ordered by case and trial), or ``None``."""

        def op(conn: Connection) -> dict[str, Any] | None:
            run = conn.execute(select(eval_runs).where(_R.id == run_id)).mappings().first()
            if run is None:
                return None
            trials = conn.execute(
                select(eval_trials).where(_T.run_id == run_id).order_by(_T.case_id, _T.trial)
            ).mappings()
            return {**dict(run), "trials": [dict(t) for t in trials]}

        return await self._read(op)

    async def get_eval_cache(self, key: str) -> dict[str, Any] | None:
        """The recorded answer under a cache key, or ``None``."""

        def op(conn: Connection) -> dict[str, Any] | None:
            value = conn.execute(select(_C.response).where(_C.key == key)).scalar()
            return dict(value) if value is not None else None

        return await self._read(op)

    async def put_eval_cache(self, key: str, trial_key: str, response: dict[str, Any]) -> None:
        """Record an answer under a cache key (replacing one recorded before)."""

        def op(conn: Connection) -> None:
            conn.execute(delete(eval_cache).where(_C.key == key))
            conn.execute(
                insert(eval_cache).values(
                    key=key, trial_key=trial_key, response=response, created_at=now_us()
                )
            )

        await self._write(op)
