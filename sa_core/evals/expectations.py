"""Scoring a trial against its case's ``expect`` block: one :class:`Score` per expectation.

``tools`` looks at the target thread's calls, ``tree`` at its children (by subagent name,
count, mode, and their own calls), ``files`` at the target thread's files, ``final`` at the last
answer, ``output`` at the structured output, ``judge`` asks the judge model, ``cost`` /
``tokens`` / ``latency`` / ``turns`` read stored usage, ``status`` / ``outcome`` how the trial
ended. A case passes when every required score passes and the weighted score reaches its
``threshold`` (1.0 by default: every expectation passes).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import jsonschema

from sa_core.evals.matching import match_tools, partial_match
from sa_core.evals.scorers import Score, limit_score
from sa_core.evals.suite import JudgeRubric

if TYPE_CHECKING:
    from sa_core.evals.judge import Judge
    from sa_core.evals.suite import Case, FileExpect, FinalExpect, TreeExpect
    from sa_core.evals.view import TrialView


async def score_expectations(
    case: Case, view: TrialView, judge: Judge | None, key: str
) -> list[Score]:
    """Every expectation of ``case`` scored on ``view`` (named ``tools``, ``tree[0]``, ...)."""
    expect = case.expect
    scores: list[Score] = []
    if expect.tools is not None:
        ok, reason = match_tools(expect.tools, view.calls)
        scores.append(Score(passed=ok, name="tools", reason=reason))
    for i, tree in enumerate(expect.tree or []):
        scores.append(_named(score_tree(tree, view), f"tree[{i}]"))
    for path, spec in (expect.files or {}).items():
        scores.append(_named(await score_file(path, spec, view), f"files[{path}]"))
    if expect.final is not None:
        scores.append(_named(score_final(expect.final, view.final), "final"))
    if expect.output is not None:
        scores.append(_named(score_output(expect.output.json_schema, view.output), "output"))
    for i, rubric in enumerate(expect.judge or []):
        scores.append(_named(await _judge(rubric, view, judge, f"{key}/judge{i}"), f"judge[{i}]"))
    scores.extend(_limits(case, view))
    if expect.status is not None:
        ok = view.status == expect.status
        scores.append(
            Score(
                passed=ok,
                name="status",
                reason=f"status {view.status}" + ("" if ok else f", expected {expect.status}"),
            )
        )
    if expect.outcome is not None:
        ok = view.outcome == expect.outcome
        scores.append(
            Score(
                passed=ok,
                name="outcome",
                reason=f"outcome {view.outcome}" + ("" if ok else f", expected {expect.outcome}"),
            )
        )
    return scores


def _named(score: Score, name: str) -> Score:
    score.name = name
    return score


def _limits(case: Case, view: TrialView) -> list[Score]:
    expect = case.expect
    found = []
    if expect.cost is not None:
        found.append(limit_score("cost", view.cost_usd, expect.cost.max_usd, " USD"))
    if expect.tokens is not None:
        found.append(limit_score("tokens", view.usage.total_tokens, expect.tokens.max, " tokens"))
    if expect.latency is not None:
        found.append(limit_score("latency", view.latency_s, expect.latency.max_s, " s"))
    if expect.turns is not None:
        found.append(limit_score("turns", view.turns, expect.turns.max, " model calls"))
    return found


def score_tree(spec: TreeExpect, view: TrialView) -> Score:
    """Children named ``spec.child``: their count, mode, and (each) their own tool calls."""
    children = [c for c in view.children if spec.child in (c.agent, c.name)]
    count_ok = len(children) == spec.count if spec.count is not None else bool(children)
    wanted = f"{spec.count}" if spec.count is not None else "at least 1"
    if not count_ok:
        found = sorted({c.agent for c in view.children}) or "none"
        return Score(
            passed=False,
            reason=f"{len(children)} {spec.child} child(ren), expected "
            f"{wanted} (children: {found})",
        )
    for child in children:
        if spec.mode is not None and child.mode != spec.mode:
            return Score(
                passed=False, reason=f"{child.path} ran {child.mode}, expected {spec.mode}"
            )
        if spec.tools is not None:
            ok, reason = match_tools(spec.tools, child.tool_calls)
            if not ok:
                return Score(passed=False, reason=f"{child.path}: {reason}")
    return Score(passed=True, reason=f"{len(children)} {spec.child} child(ren) as expected")


async def score_file(path: str, spec: FileExpect, view: TrialView) -> Score:
    """A file of the target thread: exists, equals, contains, regex, json_contains."""
    data = await view.read_file(path)
    if spec.exists is False:
        return Score(passed=data is None, reason=f"{path} {'absent' if data is None else 'exists'}")
    if data is None:
        return Score(passed=False, reason=f"{path} does not exist (files: {view.files or 'none'})")
    text = data.decode("utf-8", "replace")
    if spec.equals is not None and text != spec.equals:
        return Score(passed=False, reason=f"{path} differs from the expected text")
    if spec.contains is not None and spec.contains not in text:
        return Score(passed=False, reason=f"{path} does not contain {spec.contains!r}")
    if spec.regex is not None and re.search(spec.regex, text) is None:
        return Score(passed=False, reason=f"{path} does not match /{spec.regex}/")
    if spec.json_contains is not None:
        try:
            value = json.loads(text)
        except ValueError:
            return Score(passed=False, reason=f"{path} is not JSON")
        items = value if isinstance(value, list) else [value]
        if not any(partial_match(spec.json_contains, item) for item in items):
            return Score(
                passed=False,
                reason=f"{path} has no JSON value containing {json.dumps(spec.json_contains)}",
            )
    return Score(passed=True, reason=f"{path} as expected")


def score_final(spec: FinalExpect, text: str) -> Score:
    """The last answer's text against contains / contains_any / regex / equals."""
    shown = text if len(text) <= 120 else text[:117] + "..."
    lowered = text.lower()
    needles = [spec.contains] if isinstance(spec.contains, str) else spec.contains or []
    for needle in needles:
        if needle.lower() not in lowered:
            return Score(passed=False, reason=f"final answer lacks {needle!r}: {shown!r}")
    if spec.contains_any and not any(n.lower() in lowered for n in spec.contains_any):
        return Score(
            passed=False, reason=f"final answer has none of {spec.contains_any}: {shown!r}"
        )
    if spec.regex is not None and re.search(spec.regex, text) is None:
        return Score(passed=False, reason=f"final answer does not match /{spec.regex}/: {shown!r}")
    if spec.equals is not None and text.strip() != spec.equals.strip():
        return Score(passed=False, reason=f"final answer is {shown!r}, expected {spec.equals!r}")
    return Score(passed=True, reason="final answer as expected")


def score_output(schema: dict[str, object], output: object) -> Score:
    """The structured output against a JSON Schema (every violation listed)."""
    if output is None:
        return Score(passed=False, reason="no structured output")
    validator = jsonschema.Draft202012Validator(schema)
    errors = [
        f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(output)
    ]
    if errors:
        return Score(passed=False, reason="output violates the schema: " + "; ".join(errors))
    return Score(passed=True, reason="output matches the schema")


async def _judge(
    rubric: str | JudgeRubric, view: TrialView, judge: Judge | None, key: str
) -> Score:
    spec = rubric if isinstance(rubric, JudgeRubric) else JudgeRubric(rubric=rubric)
    if judge is None:
        return Score(
            passed=False,
            reason="no judge model: set models={'judge': ...} or judge_model in the suite",
        )
    try:
        return await judge.score(spec, view, key)
    except Exception as exc:  # a judge that cannot answer fails its rubric, not the run
        return Score(
            passed=False,
            reason=f"the judge could not answer: {exc}",
            details={"rubric": spec.rubric},
        )


def case_verdict(case: Case, scores: list[Score]) -> tuple[bool, float]:
    """(passed, weighted score) of a trial's scores under the case's weights and required."""
    for score in scores:
        kind = score.name.split("[", 1)[0]
        score.weight = case.weights.get(score.name, case.weights.get(kind, score.weight))
        score.required = score.required or score.name in case.required or kind in case.required
    total = sum(s.weight for s in scores)
    value = sum(s.weight * (s.score or 0.0) for s in scores) / total if total else 1.0
    required_ok = all(s.passed for s in scores if s.required)
    if case.threshold >= 1.0:
        return required_ok and all(s.passed for s in scores), value
    return required_ok and value >= case.threshold, value
