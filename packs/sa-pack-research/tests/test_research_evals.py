"""The research pack's eval suite, offline: one test per case (``@pytest.mark.sa_eval``)."""

from __future__ import annotations

import pytest
from offline_research import offline_research_model
from sa_pack_research import pack

from sa_core.evals.casetest import EvalCase
from sa_core.testing import RuntimeFactory


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
