"""The suite format: loading, @file references, errors, the shipped schema, matching, pass@k."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from sa_core.evals import Suite, SuiteError, pass_at_k, pass_hat_k
from sa_core.evals.matching import match_tools
from sa_core.evals.report import Report
from sa_core.evals.results import TrialResult
from sa_core.evals.schema import shipped_schema, suite_schema
from sa_core.evals.suite import ToolsExpect
from sa_core.evals.view import CallView

FIXTURES = Path(__file__).parent / "fixtures" / "evals"
EXAMPLE_SUITES = [FIXTURES / "suite.yaml", *Path(__file__).parents[1].glob("packs/*/evals/*.yaml")]


def test_load_resolves_file_references_relative_to_the_suite() -> None:
    suite = Suite.load(FIXTURES / "suite.yaml")
    case = suite.case("refund-damaged-item")
    assert json.loads(case.files["/orders/4411.json"]) == {"order_id": "4411", "item": "kettle"}
    structured = suite.case("structured-refund")
    assert structured.output_schema is not None and structured.output_schema["type"] == "object"
    assert structured.expect.output is not None
    assert structured.expect.output.json_schema["required"] == ["status", "order_id"]
    assert suite.case("impatient-customer").simulate is not None


def test_invalid_suite_lists_every_problem_with_case_id_and_field(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        yaml.safe_dump(
            {
                "suite": "s",
                "target": "p/a",
                "cases": [
                    {"id": "one", "expect": {"tools": {"match": "sometimes"}}},
                    {"id": "two", "files": {"/a": "@missing.txt"}},
                    {"id": "three", "expect": {"final": {"containz": "x"}}},
                ],
            }
        )
    )
    with pytest.raises(SuiteError) as caught:
        Suite.load(tmp_path / "bad.yaml")
    assert caught.value.problems == [
        "case 'two' field files./a: @file 'missing.txt' not found (looked in "
        f"{tmp_path / 'missing.txt'})"
    ]
    (tmp_path / "bad.yaml").write_text(
        yaml.safe_dump(
            {
                "suite": "s",
                "target": "p/a",
                "cases": [
                    {"id": "one", "expect": {"tools": {"match": "sometimes"}}},
                    {"id": "three", "expect": {"final": {"containz": "x"}}},
                ],
            }
        )
    )
    with pytest.raises(SuiteError) as caught:
        Suite.load(tmp_path / "bad.yaml")
    problems = caught.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("case 'one' field expect.tools.match:")
    assert problems[1].startswith("case 'three' field expect.final.containz:")
    assert "2 problem(s)" in str(caught.value)


def test_duplicate_case_ids_and_missing_file_are_named(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="repeated: a"):
        Suite.parse({"suite": "s", "target": "p/a", "cases": [{"id": "a"}, {"id": "a"}]})
    with pytest.raises(SuiteError, match="cannot read the file"):
        Suite.load(tmp_path / "absent.yaml")


def test_shipped_schema_is_the_models_and_example_suites_validate() -> None:
    assert shipped_schema() == json.loads(json.dumps(suite_schema()))
    validator = jsonschema.Draft202012Validator(shipped_schema())
    assert len(EXAMPLE_SUITES) >= 6  # the fixture's and each example pack's
    for path in EXAMPLE_SUITES:
        document = yaml.safe_load(path.read_text())
        errors = [e.message for e in validator.iter_errors(document)]
        assert errors == [], path
    assert list(validator.iter_errors({"suite": "s", "target": "t", "cases": [{"idx": 1}]}))


def _calls(*names: str, **args: dict[str, object]) -> list[CallView]:
    return [CallView(name=n, arguments=args.get(n, {})) for n in names]


@pytest.mark.parametrize(
    ("match", "calls", "actual", "passed"),
    [
        ("exact", ["a", "b"], ["a", "b"], True),
        ("exact", ["a", "b"], ["a", "x", "b"], False),
        ("exact", ["a", "b"], ["b", "a"], False),
        ("in_order", ["a", "b"], ["a", "x", "b"], True),
        ("in_order", ["a", "b"], ["b", "a"], False),
        ("any_order", ["a", "b"], ["b", "x", "a"], True),
        ("any_order", ["a", "a"], ["a", "b"], False),
        ("subset", ["a", "b"], ["a"], True),
        ("subset", ["a", "b"], ["a", "c"], False),
    ],
)
def test_tool_matching_modes(match: str, calls: list[str], actual: list[str], passed: bool) -> None:
    expect = ToolsExpect.model_validate({"match": match, "calls": calls})
    assert match_tools(expect, _calls(*actual))[0] is passed


def test_partial_arguments_and_forbid() -> None:
    made = [CallView("lookup_order", {"order_id": "4411", "verbose": True}), CallView("refund", {})]
    wanted = ToolsExpect.model_validate(
        {"match": "in_order", "calls": [{"lookup_order": {"order_id": "4411"}}, "refund"]}
    )
    assert match_tools(wanted, made) == (True, "2 call(s) in order")
    other = ToolsExpect.model_validate({"calls": [{"lookup_order": {"order_id": "9"}}]})
    assert match_tools(other, made)[0] is False
    numeric = ToolsExpect.model_validate({"calls": [{"lookup_order": {"order_id": 4411}}]})
    assert match_tools(numeric, made)[0] is True
    forbid = ToolsExpect.model_validate({"forbid": [{"refund": {}}]})
    ok, reason = match_tools(forbid, made)
    assert not ok and "forbidden call refund" in reason


def test_pass_at_k_and_pass_hat_k_closed_forms() -> None:
    assert pass_at_k(5, 3, 1) == pytest.approx(0.6)
    assert pass_at_k(5, 3, 2) == pytest.approx(0.9)
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_hat_k(5, 5, 5) == 1.0
    with pytest.raises(ValueError, match="n >= 1"):
        pass_at_k(0, 0, 1)


def test_report_of_a_constructed_run_has_the_closed_forms_and_gates() -> None:
    trials = [
        TrialResult("c", i, None, passed=i < 3, score=1.0 if i < 3 else 0.0) for i in range(5)
    ]
    report = Report("run_x", "s", "p/a", trials)
    (case,) = report.cases
    assert (case.pass_at(1), case.pass_at(2), case.pass_hat(2)) == pytest.approx((0.6, 0.9, 0.3))
    metrics = report.metrics()
    assert metrics["pass_at_1"] == pytest.approx(0.6)
    assert metrics["pass_at_2"] == pytest.approx(0.9)
    assert metrics["pass_hat_2"] == pytest.approx(0.3)
    assert report.gate("pass_at_1>=0.5,regressions=0")
    failed = report.gate("pass_at_1>=0.9")
    assert not failed and failed.failures == ["pass_at_1 is 0.6, gate wants >=0.9"]
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        report.gate("nope>1")
