"""The notes pack's eval suite, offline: one test per case (``@pytest.mark.sa_eval``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from offline_notes import offline_notes_model
from sa_pack_notes import pack

from sa_core.evals.casetest import EvalCase
from sa_core.testing import RuntimeFactory


@pytest.mark.asyncio
@pytest.mark.sa_eval("../evals/suite.yaml")
async def test_notes_suite_case(
    sa_eval_case: EvalCase, sa_runtime_factory: RuntimeFactory, tmp_path: Path
) -> None:
    async with sa_runtime_factory(
        packs=[pack], providers={"openai": offline_notes_model()}, env={"NOTES_DIR": str(tmp_path)}
    ) as runtime:
        report = await sa_eval_case.run(runtime, concurrency=2)
    sa_eval_case.assert_passed(report)
