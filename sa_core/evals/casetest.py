"""One case of a suite as a pytest test (``@pytest.mark.sa_eval("evals/suite.yaml")``).

The pytest plugin (:mod:`sa_core.pytest_plugin`) parametrises a test marked ``sa_eval`` with
one :class:`EvalCase` per case of the suite, as its ``sa_eval_case`` argument::

    @pytest.mark.sa_eval("evals/suite.yaml")
    async def test_suite(sa_eval_case, sa_runtime_factory):
        async with sa_runtime_factory(packs=[pack], providers={"openai": offline}) as rt:
            report = await sa_eval_case.run(rt)
        sa_eval_case.assert_passed(report)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sa_core.evals.runner import run_suite

if TYPE_CHECKING:
    from sa_core.evals.report import Report
    from sa_core.evals.suite import Case, Suite
    from sa_core.runtime import Runtime


@dataclass(frozen=True)
class EvalCase:
    """A case of a suite, to run as one test."""

    suite: Suite
    case: Case

    @property
    def id(self) -> str:
        """The case id (the test's parameter id)."""
        return self.case.id

    async def run(self, runtime: Runtime, **options: Any) -> Report:
        """Run this case's trials (``options`` as :func:`~sa_core.evals.run_suite` takes)."""
        return await run_suite(self.suite, runtime=runtime, cases=[self.case.id], **options)

    def failures(self, report: Report) -> list[str]:
        """``trial n: name: reason`` for every failed expectation of the case's trials."""
        return [
            f"trial {t.trial}: {s.name}: {s.reason}"
            for t in report.trials
            if t.case_id == self.case.id and not t.passed
            for s in t.failures
        ]

    def assert_passed(self, report: Report) -> None:
        """Fail the test, listing every failed expectation, unless every trial passed.

        Raises:
            AssertionError: a trial failed.
        """
        failures = self.failures(report)
        if failures:
            raise AssertionError(f"case {self.case.id!r} failed:\n  " + "\n  ".join(failures))
