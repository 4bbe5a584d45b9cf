"""The reminders pack's eval suite, offline: one test per case (``@pytest.mark.sa_eval``)."""

from __future__ import annotations

import pytest
from offline_reminders import offline_reminders_model
from sa_pack_reminders import pack

from sa_core.evals.casetest import EvalCase
from sa_core.testing import RuntimeFactory


@pytest.mark.asyncio
@pytest.mark.sa_eval("../evals/suite.yaml")
async def test_reminders_suite_case(
    sa_eval_case: EvalCase, sa_runtime_factory: RuntimeFactory
) -> None:
    provider = offline_reminders_model()
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as runtime:
        report = await sa_eval_case.run(runtime, concurrency=2)
    sa_eval_case.assert_passed(report)
