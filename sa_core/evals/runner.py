"""Running a suite: every case's trials as ordinary tagged threads, concurrently, then scored.

Each trial is a thread of the target agent (or of the case's simulated-user ``dual_ai`` agent)
tagged ``eval``, ``eval-run:<run id>``, ``eval-case:<case id>`` and ``eval-trial:<n>``, so the
console and ``GET /threads?tag=`` find them like any thread. Its input files are written to
the thread's filesystem, its user turns sent one by one (each settles before the next), and the
trial waits until its whole tree settled (background children included). It is then scored from
stored rows (:mod:`sa_core.evals.view`) and its row committed at once (:mod:`sa_core.store.evals`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sa_core.evals.cache import CACHE_MODES, TrialKeys
from sa_core.evals.context import RunContext, check_models, run_overrides
from sa_core.evals.scoring import score_trial
from sa_core.evals.simulate import add_simulated_users, sim_agent_name
from sa_core.evals.storedrun import baseline_report, save_run
from sa_core.providers import ProviderResponse, ProviderToolCall

if TYPE_CHECKING:
    from sa_core.evals.report import Report
    from sa_core.evals.results import TrialResult
    from sa_core.evals.suite import Case, Suite
    from sa_core.runtime import Runtime

Progress = Callable[[int, int], None]
SETTLE_TIMEOUT = 600.0
"""Seconds a trial's tree may take to settle after its last turn."""


async def run_suite(
    suite: Suite,
    *,
    runtime: Runtime,
    trials: int | None = None,
    concurrency: int = 4,
    models: Mapping[str, str] | None = None,
    cache: str = "off",
    baseline: str | Path | None = None,
    cases: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Run every case's trials and return the scored report (stored as a run).

    Args:
        suite: the suite (:meth:`Suite.load`).
        runtime: an open runtime with the target's pack.
        trials: trials per case (default: the case's, else the suite's ``trials``).
        concurrency: trials running at once.
        models: model name (or role ``judge`` / ``user``) -> model definition of the pack.
        cache: ``off``, ``record``, ``replay`` or ``replay-or-record``.
        baseline: a stored run id or a run JSON file to compare with.
        cases: only these case ids.
        progress: called with (trials done, trials in all) as trials finish.

    Raises:
        ValueError: an unknown cache mode, case id or concurrency below 1.
        DefinitionNotFoundError: the target or a mapped model does not exist.
    """
    if cache not in CACHE_MODES:
        raise ValueError(f"cache must be one of {', '.join(CACHE_MODES)}, not {cache!r}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    agent, scope = runtime.registry.entry_agent(suite.target)
    chosen = [suite.case(c) for c in cases] if cases else list(suite.cases)
    context = RunContext(
        runtime=runtime,
        suite=suite,
        scope=scope,
        agent=agent.name,
        run_id=f"run_{uuid.uuid4().hex[:16]}",
        cache=cache,  # type: ignore[arg-type]
        models=check_models(scope, models or {}),
        keys=TrialKeys(runtime.store),
    )
    plan = [(case, i) for case in chosen for i in range(trials or case.trials or suite.trials)]
    meta = {
        "cache": cache,
        "models": context.models,
        "concurrency": concurrency,
        "suite_document": suite.model_dump(mode="json"),
        "suite_path": suite.path,
    }
    await save_run(runtime, context.run_id, suite, status="running", meta=meta, trials=[])
    gate = asyncio.Semaphore(concurrency)
    done: list[TrialResult] = []

    async def one(case: Case, index: int) -> TrialResult:
        async with gate:
            result = await run_trial(context, case, index)
        done.append(result)
        if progress is not None:
            progress(len(done), len(plan))
        return result

    add_simulated_users(runtime, scope.package, agent.name, chosen, context.models.get("user"))
    async with run_overrides(context):
        results = await asyncio.gather(*(one(case, i) for case, i in plan))
    meta["cache_stats"] = context.stats.as_dict()
    base = await baseline_report(runtime, baseline) if baseline is not None else None
    return await save_run(
        runtime,
        context.run_id,
        suite,
        status="finished",
        meta=meta,
        trials=list(results),
        baseline=base,
    )


def trial_tags(context: RunContext, case: Case, index: int) -> list[str]:
    """The tags of a trial's thread."""
    return [
        "eval",
        f"eval-run:{context.run_id}",
        f"eval-suite:{context.suite.suite}",
        f"eval-case:{case.id}",
        f"eval-trial:{index}",
    ]


def recorded_answers(case: Case) -> deque[ProviderResponse]:
    """A case's recorded model answers (from ``from_thread``), in order."""
    answers: deque[ProviderResponse] = deque()
    for answer in case.from_thread.answers if case.from_thread else []:
        calls = [
            ProviderToolCall(
                id=c.get("id") or f"call_rec{i}",
                name=c["name"],
                arguments=dict(c.get("arguments") or {}),
            )
            for i, c in enumerate(answer.tool_calls)
        ]
        answers.append(
            ProviderResponse(
                content=answer.content,
                tool_calls=calls,
                finish_reason="tool_calls" if calls else "stop",
            )
        )
    return answers


async def run_trial(context: RunContext, case: Case, index: int) -> TrialResult:
    """Run one trial of a case, score it and store its row."""
    runtime = context.runtime
    key = f"{context.suite.suite}/{case.id}/{index}"
    sim = case.simulate
    agent = (
        sim.agent
        if sim is not None and sim.agent
        else (sim_agent_name(case.id) if sim is not None else (case.target or context.agent))
    )
    error: str | None = None
    thread_id: str | None = None
    try:
        state = await runtime.create_thread(
            agent,
            package=context.package,
            tags=trial_tags(context, case, index),
            properties={"eval": {"run_id": context.run_id, "case_id": case.id, "trial": index}},
        )
        thread_id = state.thread_id
        context.keys.register(thread_id, key)
        if case.from_thread is not None:
            context.recorded[key] = recorded_answers(case)
        for path, content in case.files.items():
            await state.write_file(path, content)
        if sim is not None:
            await state.send_message(sim.opening or f"Hi. {sim.goal or ''}".strip())
        turns = case.turns()
        for number, turn in enumerate(turns, 1):
            schema = case.output_schema if number == len(turns) else None
            await state.send_message(turn, output_schema=schema)
        await settle_tree(runtime, thread_id)
    except Exception as exc:  # the trial failed; its score says why
        error = f"{type(exc).__name__}: {exc}"
    missed = any(
        m["trial"] in (key, f"eval-judge:{key}") or m["trial"].startswith(f"eval-judge:{key}/")
        for m in context.stats.missed
    )
    if missed and context.cache == "replay" and error is None:
        error = "cache miss under cache='replay'"
    result = await score_trial(context, case, index, thread_id, error)
    result.cache_miss = missed
    context.keys.forget(key)
    context.recorded.pop(key, None)
    await runtime.store.save_eval_trial(
        context.run_id,
        case.id,
        index,
        thread_id=thread_id,
        passed=result.passed,
        score=result.score,
        result=result.as_dict(),
    )
    return result


async def settle_tree(runtime: Runtime, thread_id: str, timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait until the thread and every descendant have no work left.

    Raises:
        TimeoutError: the tree still had work after ``timeout`` seconds.
    """
    async with asyncio.timeout(timeout):
        while True:
            ids = [thread_id, *await runtime.store.descendant_ids(thread_id)]
            busy = [i for i in ids if runtime.is_running(i) or not await runtime.turn_settled(i)]
            if not busy:
                return
            await asyncio.sleep(0.01)
