"""The research pack's eval suite, offline: one test per case (``@pytest.mark.sa_eval``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from offline_research import offline_research_model
from sa_pack_research import pack

from sa_core.evals import Suite, run_suite
from sa_core.evals.casetest import EvalCase
from sa_core.testing import RuntimeFactory

SUITE = Path(__file__).resolve().parents[1] / "evals" / "suite.yaml"


@pytest.mark.asyncio
@pytest.mark.sa_eval("../evals/suite.yaml")
async def test_research_suite_case(
    sa_eval_case: EvalCase, sa_runtime_factory: RuntimeFactory
) -> None:
    provider = offline_research_model()
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as runtime:
        report = await sa_eval_case.run(runtime, concurrency=2)
    if "expected-failure" not in sa_eval_case.case.tags:
        sa_eval_case.assert_passed(report)
        return
    for trial in report.trials:  # the flat tool list passes; the tree check catches the skip
        scores = {s.name: s for s in trial.scores}
        assert scores["tools"].passed
        assert not scores["tree[0]"].passed
        assert (
            scores["tree[0]"].reason
            == "/fact_checker: analyze_draft not found in order among no calls"
        )
        assert not trial.passed


@pytest.mark.asyncio
async def test_research_suite_writes_junit_that_parses(
    sa_runtime_factory: RuntimeFactory, tmp_path: Path
) -> None:
    suite = Suite.load(SUITE)
    async with sa_runtime_factory(
        packs=[pack], providers={"openai": offline_research_model()}
    ) as runtime:
        report = await run_suite(suite, runtime=runtime, concurrency=4)
    root = ET.parse(report.write_junit(tmp_path / "junit.xml")).getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 2 * len(suite.cases)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {"unchecked-draft[0]", "unchecked-draft[1]"}
    kinds = {s.name.split("[")[0] for t in report.trials for s in t.scores}
    assert kinds >= {
        "tools",
        "tree",
        "files",
        "final",
        "output",
        "judge",
        "status",
        "outcome",
        "tokens",
        "latency",
        "turns",
        "cost",
        "no_errors",
    }
