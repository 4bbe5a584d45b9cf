"""The support desk's eval suite, offline: one test per case (``@pytest.mark.sa_eval``)."""

from __future__ import annotations

import pytest
from offline_desk import offline_desk_model
from sa_pack_support_desk import pack

from sa_core.evals.casetest import EvalCase
from sa_core.testing import RuntimeFactory


@pytest.mark.asyncio
@pytest.mark.sa_eval("../evals/suite.yaml")
async def test_support_desk_suite_case(
    sa_eval_case: EvalCase, sa_runtime_factory: RuntimeFactory
) -> None:
    provider = offline_desk_model()
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as runtime:
        report = await sa_eval_case.run(runtime, concurrency=2)
    sa_eval_case.assert_passed(report)
