"""The eval tables: stored eval runs, their trials, and the eval model-call cache.

They share the store's :data:`~sa_core.store.tables.metadata` (``create_all`` builds them with
the rest); :mod:`sa_core.store.migrate` imports this module so a new database gets them and the
schema comparison sees them. Trials reference their thread by id without a foreign key: deleting
a trial's thread leaves the run's record (its scores) as it was.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Column, Float, Index, Integer, String, Table

from sa_core.store.tables import metadata

eval_runs = Table(
    "eval_runs",
    metadata,
    Column("id", String, primary_key=True),
    Column("suite", String, nullable=False),
    Column("target", String, nullable=False),
    Column("status", String, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger),
    Column("summary", JSON(none_as_null=True)),
    Column("document", JSON(none_as_null=True)),
    Index("ix_eval_runs_created", "created_at"),
)
"""A run of a suite: ``status`` ``running`` until every trial is stored, then ``finished``;
``summary`` its per-case figures, ``document`` the run's settings (suite, cache, models, case
definitions) as the run JSON has them."""

eval_trials = Table(
    "eval_trials",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("case_id", String, primary_key=True),
    Column("trial", Integer, primary_key=True),
    Column("thread_id", String),
    Column("passed", Boolean, nullable=False),
    Column("score", Float, nullable=False),
    Column("result", JSON(none_as_null=True)),
    Column("created_at", BigInteger, nullable=False),
)
"""One trial of a run: its thread, verdict, score, and ``result`` (the scores with reasons,
cost, latency, status, outcome) as the run JSON has it."""

eval_cache = Table(
    "eval_cache",
    metadata,
    Column("key", String, primary_key=True),
    Column("trial_key", String, nullable=False),
    Column("response", JSON(none_as_null=True)),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_eval_cache_trial", "trial_key"),
)
"""A model answer recorded by an eval run with ``cache="record"``: ``key`` is the SHA-256 of the
canonical request and the trial's cache key (:mod:`sa_core.evals.cache`)."""

EVAL_TABLES = (eval_runs, eval_trials, eval_cache)
