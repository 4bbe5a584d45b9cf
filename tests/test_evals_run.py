"""Running suites end to end over the shop pack, offline: scoring, cache, cost, baselines."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sqlalchemy import func, select

from sa_core.evals import Score, Suite, TrialView, load_run, run_suite, scorer
from sa_core.store import tables as t
from sa_core.testing import FunctionProvider, RuntimeFactory
from tests.evals_kit import DESK_PROMPT, offline_provider, shop_pack

pytestmark = pytest.mark.asyncio

SUITE = Path(__file__).parent / "fixtures" / "evals" / "suite.yaml"


def _agent_calls(provider: FunctionProvider) -> int:
    return sum(1 for r in provider.requests if not (r.user or "").startswith("eval-judge:"))


async def test_every_expectation_kind_passes_and_the_trials_are_tagged_threads(
    sa_runtime_factory: RuntimeFactory, tmp_path: Path
) -> None:
    provider = offline_provider()
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": provider}) as rt:
        report = await run_suite(Suite.load(SUITE), runtime=rt, concurrency=8)
        tagged, total = await rt.store.list_threads(tag=f"eval-run:{report.run_id}")
    assert report.passed and report.metrics()["pass_at_1"] == 1.0
    names = {s.name for trial in report.trials for s in trial.scores}
    assert {
        "tools",
        "tree[0]",
        "files[/refunds/4411.json]",
        "final",
        "output",
        "judge[0]",
        "turns",
        "status",
        "outcome",
        "no_errors",
        "cost",
    } <= names
    assert total == len(report.trials) == 6
    assert {"eval", "eval-case:refund-damaged-item"} <= set(
        next(r.tags for r in tagged if "eval-case:refund-damaged-item" in r.tags)
    )
    judge = next(s for s in report.trials[0].scores if s.name == "judge[0]")
    assert len(judge.details["samples"]) == 3
    assert all(s["reasoning"] for s in judge.details["samples"])
    junit = ET.parse(report.write_junit(tmp_path / "junit.xml")).getroot()
    assert len(junit.findall("./testsuite/testcase")) == 6
    assert not junit.findall(".//failure")
    written = json.loads(report.write(tmp_path / "run.json").read_text())
    assert written["format"] == "sa-eval-run" and written["version"] == 1
    assert written["cases"][0]["pass_at_k"] == {"1": 1.0, "2": 1.0}


async def test_simulated_user_ends_the_session_by_its_stop_binding(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    async with sa_runtime_factory(
        packs=[shop_pack()], providers={"test": offline_provider()}
    ) as rt:
        report = await run_suite(
            Suite.load(SUITE), runtime=rt, cases=["impatient-customer"], trials=1
        )
        trial = report.trials[0]
        assert trial.outcome == "success" and trial.passed
        state = await rt.get_thread(str(trial.thread_id))
        messages = (await state.get_messages(limit=200)).messages
    user_calls = [c.name for m in messages if m.role == "user" for c in m.tool_calls or []]
    assert user_calls == ["eval_user_done"]
    assert messages[0].content == "where is my money"
    assert state.agent.type == "dual_ai"


async def test_tree_check_fails_where_the_flat_tool_list_passes(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    suite = Suite.load(SUITE)
    suite.case("refund-damaged-item").input = "My kettle arrived broken, order 4411, skip-check"
    async with sa_runtime_factory(
        packs=[shop_pack()], providers={"test": offline_provider()}
    ) as rt:
        report = await run_suite(suite, runtime=rt, cases=["refund-damaged-item"], trials=1)
    scores = {s.name: s for s in report.trials[0].scores}
    assert scores["tools"].passed
    assert not scores["tree[0]"].passed
    assert scores["tree[0]"].reason == "/checker: missing ['read_policy'] among no calls"
    assert not report.trials[0].passed


async def test_cache_reruns_with_no_provider_calls_and_misses_only_the_edited_prompt(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    suite = Suite.load(SUITE)
    first = offline_provider()
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": first}) as rt:
        recorded = await run_suite(suite, runtime=rt, cache="record", concurrency=4)
    per_trial = [t.model_calls for t in recorded.trials]
    assert recorded.meta["cache_stats"]["provider_calls"] == first.call_count
    assert _agent_calls(first) == sum(per_trial)  # two trials of a case: each asked the model
    second = offline_provider()
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": second}) as rt:
        replayed = await run_suite(suite, runtime=rt, cache="replay", concurrency=4)
    assert second.call_count == 0
    assert [t.passed for t in replayed.trials] == [t.passed for t in recorded.trials]
    assert [t.score for t in replayed.trials] == [t.score for t in recorded.trials]
    assert replayed.cost_usd == recorded.cost_usd
    edited = offline_provider()
    pack = shop_pack(checker_prompt="CHECKER-A. Read the policy first, then decide.")
    async with sa_runtime_factory(packs=[pack], providers={"test": edited}) as rt:
        changed = await run_suite(suite, runtime=rt, cache="replay-or-record", concurrency=4)
    missed = changed.meta["cache_stats"]["missed"]
    assert missed and {m["system"][:9] for m in missed} == {"CHECKER-A"}
    assert edited.call_count == len(missed)
    assert all((r.messages[0].content or "").startswith("CHECKER-A") for r in edited.requests)


async def test_a_replay_miss_fails_the_trial_as_a_cache_miss(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    provider = offline_provider()
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": provider}) as rt:
        report = await run_suite(
            Suite.load(SUITE), runtime=rt, cache="replay", trials=1, cases=["refund-damaged-item"]
        )
    assert provider.call_count == 0
    assert report.trials[0].cache_miss and not report.trials[0].passed


async def test_reported_cost_is_the_sum_of_stored_model_call_costs(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    async with sa_runtime_factory(
        packs=[shop_pack()], providers={"test": offline_provider()}
    ) as rt:
        report = await run_suite(Suite.load(SUITE), runtime=rt, concurrency=4)

        def stored(conn: object) -> float:
            cost = t.logs.c.data["cost_total"].as_float()
            query = select(func.sum(cost)).where(t.logs.c.type == "llm_call")
            return float(conn.execute(query).scalar() or 0.0)  # type: ignore[attr-defined]

        total = await rt.store.read(stored)
    assert total > 0
    assert report.cost_usd == pytest.approx(total)
    assert sum(c.cost_usd for c in report.cases) == pytest.approx(total)


async def test_a_seeded_regression_is_reported_and_unchanged_reruns_report_none(
    sa_runtime_factory: RuntimeFactory, tmp_path: Path
) -> None:
    suite = Suite.load(SUITE)
    async with sa_runtime_factory(
        packs=[shop_pack()], providers={"test": offline_provider()}
    ) as rt:
        baseline = await run_suite(suite, runtime=rt, cache="record", concurrency=8)
        baseline.write(tmp_path / "baseline.json")
        for _ in range(20):
            rerun = await run_suite(
                suite, runtime=rt, cache="replay", concurrency=8, baseline=baseline.run_id
            )
            assert rerun.comparison is not None
            assert (rerun.comparison.regressions, rerun.comparison.improvements) == ([], [])
            assert rerun.gate("pass_at_1>=0.9,regressions=0")
    broken = shop_pack(desk_prompt=DESK_PROMPT + " ASK-PHONE")
    async with sa_runtime_factory(packs=[broken], providers={"test": offline_provider()}) as rt:
        report = await run_suite(suite, runtime=rt, baseline=tmp_path / "baseline.json")
    assert report.comparison is not None
    assert report.comparison.regressions == ["impatient-customer"]
    assert report.comparison.improvements == report.comparison.flaky == []
    gate = report.gate("pass_at_1>=0.9,regressions=0")
    assert not gate and "regressions is 1, gate wants =0" in gate.failures


async def test_rescore_reads_stored_trials_without_agent_model_calls(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    provider = offline_provider()

    @scorer
    async def mentions_card(view: TrialView) -> Score:
        return Score(passed="card" in view.final, reason=view.final[:40])

    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": provider}) as rt:
        report = await run_suite(Suite.load(SUITE), runtime=rt, cache="record")
        before = provider.call_count
        rescored = await load_run(rt, report.run_id).rescore([mentions_card])
        assert provider.call_count == before  # the judge's answers come from the run's cache
        stored = await load_run(rt, report.run_id)
    extra = {
        t.case_id: next(s for s in t.scores if s.name == "mentions_card") for t in rescored.trials
    }
    assert extra["refund-damaged-item"].passed and not extra["structured-refund"].passed
    assert [t.passed for t in rescored.trials] == [True, True, False, False, True, True]
    assert stored.report.trials[0].scores[-1].name == "mentions_card"


async def test_models_override_a_prompt_model_and_the_judge_for_the_run_only(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    provider = offline_provider()
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": provider}) as rt:
        report = await run_suite(
            Suite.load(SUITE),
            runtime=rt,
            trials=1,
            cases=["refund-damaged-item"],
            models={"fast": "judge", "judge": "fast"},
        )
        assert rt.registry.scope("shop").models["fast"].model == "m"  # restored
    agent = [r for r in provider.requests if not (r.user or "").startswith("eval-judge:")]
    judged = [r for r in provider.requests if (r.user or "").startswith("eval-judge:")]
    assert agent and {r.model for r in agent} == {"judge-m"}
    assert judged and {r.model for r in judged} == {"m"}
    assert report.trials[0].passed


async def test_weights_required_and_threshold_decide_a_case(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    suite = Suite.parse(
        {
            "suite": "weights",
            "target": "shop/desk",
            "cases": [
                {
                    "id": "lenient",
                    "input": "refund order 4411",
                    "threshold": 0.6,
                    "weights": {"final": 3},
                    "required": ["tools"],
                    "expect": {
                        "tools": {"calls": ["lookup_order"]},
                        "final": {"contains": "refund"},
                        "files": {"/nope.txt": {"exists": True}},
                    },
                },
                {
                    "id": "required-fails",
                    "input": "refund order 4411",
                    "threshold": 0.5,
                    "required": ["tools"],
                    "expect": {
                        "tools": {"calls": ["delete_account"]},
                        "final": {"contains": "refund"},
                    },
                },
            ],
        }
    )
    async with sa_runtime_factory(
        packs=[shop_pack()], providers={"test": offline_provider()}
    ) as rt:
        report = await run_suite(suite, runtime=rt)
    lenient, strict = report.trials
    assert lenient.passed and lenient.score == pytest.approx(4 / 5)
    assert not strict.passed and strict.score == pytest.approx(0.5)


async def test_a_packs_own_dual_ai_agent_can_play_the_session(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    suite = Suite.parse(
        {
            "suite": "own-agent",
            "target": "shop/desk",
            "cases": [
                {
                    "id": "checker-session",
                    "simulate": {"agent": "checker", "opening": "refund order 4411"},
                    "expect": {"outcome": "success", "tools": {"calls": ["read_policy"]}},
                }
            ],
        }
    )
    async with sa_runtime_factory(
        packs=[shop_pack()], providers={"test": offline_provider()}
    ) as rt:
        report = await run_suite(suite, runtime=rt, trials=1)
    assert report.trials[0].passed, report.trials[0].failures
    assert report.trials[0].outcome == "success"


async def test_two_trials_of_a_case_are_never_served_from_each_other(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    provider = offline_provider()
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": provider}) as rt:
        report = await run_suite(
            Suite.load(SUITE),
            runtime=rt,
            cases=["refund-damaged-item"],
            trials=3,
            concurrency=1,
            cache="replay-or-record",
        )
    stats = report.meta["cache_stats"]
    assert stats["hits"] == 0  # trial 1 and 2 asked exactly what trial 0 asked, under their keys
    assert stats["provider_calls"] == provider.call_count == stats["misses"]
    assert _agent_calls(provider) == sum(t.model_calls for t in report.trials) == 3 * 7


async def test_runs_cache_and_rescore_on_postgresql(pg_database_url: str) -> None:
    from sa_core import Runtime

    suite = Suite.load(SUITE)
    provider = offline_provider()
    options: dict[str, object] = {"database_url": pg_database_url, "load_entrypoints": False}
    async with Runtime(packs=[shop_pack()], providers={"test": provider}, **options) as rt:  # type: ignore[arg-type]
        recorded = await run_suite(suite, runtime=rt, cache="record", concurrency=4)
    replaying = offline_provider()
    async with Runtime(packs=[shop_pack()], providers={"test": replaying}, **options) as rt:  # type: ignore[arg-type]
        replayed = await run_suite(
            suite, runtime=rt, cache="replay", concurrency=4, baseline=recorded.run_id
        )
        rescored = await load_run(rt, replayed.run_id).rescore()
        runs, total = await rt.store.list_eval_runs(package="shop")
    assert replaying.call_count == 0
    assert recorded.passed and replayed.passed and rescored.passed
    assert replayed.comparison is not None and replayed.comparison.regressions == []
    assert total == 2 and {r["id"] for r in runs} == {recorded.run_id, replayed.run_id}


async def test_a_second_run_at_once_on_one_runtime_is_refused(
    sa_runtime_factory: RuntimeFactory,
) -> None:
    import asyncio

    from tests.evals_kit import answer

    entered, release = asyncio.Event(), asyncio.Event()

    async def held(request: object) -> object:
        entered.set()
        await release.wait()  # the first run is inside its overrides until released
        return answer(request)  # type: ignore[arg-type]

    suite = Suite.load(SUITE)
    provider = FunctionProvider(held)
    async with sa_runtime_factory(packs=[shop_pack()], providers={"test": provider}) as rt:
        first = asyncio.ensure_future(run_suite(suite, runtime=rt, cases=["structured-refund"]))
        await entered.wait()
        with pytest.raises(RuntimeError, match="already in progress on this runtime"):
            await run_suite(suite, runtime=rt, cases=["structured-refund"])
        release.set()
        assert (await first).passed
        assert (await run_suite(suite, runtime=rt, cases=["structured-refund"])).passed
