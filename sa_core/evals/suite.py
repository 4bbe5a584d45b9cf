"""The suite file: cases, their inputs and the expectations a trial is scored by.

A suite is YAML (or JSON) validated by :class:`Suite`; :meth:`Suite.load` reads a file,
resolves ``@file`` references relative to the suite's directory and reports every problem at
once, each with its case id and field. The JSON Schema of the format ships in the package
(``sa_core/evals/suite.schema.json``, see :mod:`sa_core.evals.schema`).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from sa_core.errors import SAError

ToolMatch = Literal["exact", "in_order", "any_order", "subset"]
CallSpec = str | dict[str, dict[str, Any]]
"""A tool call in a ``calls`` list: a tool name, or ``{name: {partial arguments}}``."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolsExpect(_Strict):
    """Tool calls of a thread: ``match`` over ``calls``, and ``forbid``."""

    match: ToolMatch = "in_order"
    calls: list[CallSpec] = Field(default_factory=list)
    forbid: list[CallSpec] = Field(default_factory=list)


class TreeExpect(_Strict):
    """Children of the target thread by subagent name: how many, in which mode, their tools."""

    child: str
    count: int | None = Field(None, ge=0, description="Exactly this many; default at least 1.")
    mode: Literal["blocking", "non_blocking", "resumable"] | None = None
    tools: ToolsExpect | None = None


class FileExpect(_Strict):
    """A file of the trial's thread."""

    exists: bool | None = None
    equals: str | None = None
    contains: str | None = None
    regex: str | None = None
    json_contains: dict[str, Any] | None = None


class FinalExpect(_Strict):
    """The final answer's text."""

    contains: str | list[str] | None = None
    contains_any: list[str] | None = None
    regex: str | None = None
    equals: str | None = None


class OutputExpect(_Strict):
    """The structured output of the last answer (``metadata.output``)."""

    json_schema: dict[str, Any]


class JudgeRubric(_Strict):
    """A rubric a judge model answers yes or no, ``samples`` times (majority wins)."""

    rubric: str
    samples: int = Field(3, ge=1, le=15)


class MaxCost(_Strict):
    """At most this many USD over the trial's tree."""

    max_usd: float


class MaxTokens(_Strict):
    """At most this many input + output tokens over the trial's tree."""

    max: int


class MaxLatency(_Strict):
    """At most this many seconds from the first input to the settled trial."""

    max_s: float


class MaxTurns(_Strict):
    """At most this many model calls (turn steps) over the trial's tree."""

    max: int


class Expect(_Strict):
    """Every expectation kind; each one set is scored."""

    tools: ToolsExpect | None = None
    tree: list[TreeExpect] | None = None
    files: dict[str, FileExpect] | None = None
    final: FinalExpect | None = None
    output: OutputExpect | None = None
    judge: list[str | JudgeRubric] | None = None
    cost: MaxCost | None = None
    tokens: MaxTokens | None = None
    latency: MaxLatency | None = None
    turns: MaxTurns | None = None
    status: Literal["completed", "failed", "stopped", "terminated", "awaiting_approval"] | None = (
        None
    )
    outcome: Literal["success", "failure"] | None = None


class Simulate(_Strict):
    """A simulated user: a ``dual_ai`` session whose side B plays the user."""

    goal: str | None = None
    persona: str | None = None
    opening: str | None = None
    max_turns: int = Field(8, ge=1, le=200)
    agent: str | None = Field(None, description="A pack's own dual_ai agent to run instead.")


class RecordedCall(_Strict):
    """A model call's answer as a thread recorded it (written by ``sa eval case from-thread``)."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)


class FromThread(_Strict):
    """A case made from a stored thread: its user turns and its recorded model answers."""

    id: str
    upto: str | None = None
    answers: list[RecordedCall] = Field(default_factory=list)


class Case(_Strict):
    """One case: an input (or a simulated user, or a recorded thread) and its expectations."""

    id: str
    input: str | list[str] | None = None
    target: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    simulate: Simulate | None = None
    from_thread: FromThread | None = None
    expect: Expect = Field(default_factory=Expect)
    scorers: list[str | dict[str, Any]] = Field(default_factory=list)
    trials: int | None = Field(None, ge=1)
    weights: dict[str, float] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)
    threshold: float = Field(1.0, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = Field(
        None, description="Ask the last turn for structured output in this JSON Schema."
    )

    def turns(self) -> list[str]:
        """The user turns to send, in order."""
        if self.input is None:
            return []
        return [self.input] if isinstance(self.input, str) else list(self.input)


class Suite(_Strict):
    """A suite: a target agent, the trials per case, suite-wide scorers, and its cases."""

    suite: str
    target: str
    version: int = 1
    trials: int = Field(1, ge=1)
    scorers: list[str | dict[str, Any]] = Field(default_factory=list)
    judge_model: str | None = None
    cases: list[Case]
    _source: str | None = PrivateAttr(None)

    @property
    def path(self) -> str | None:
        """Where the suite was loaded from."""
        return self._source

    @field_validator("cases")
    @classmethod
    def _unique_ids(cls, cases: list[Case]) -> list[Case]:
        seen: set[str] = set()
        dupes = [c.id for c in cases if c.id in seen or seen.add(c.id)]  # type: ignore[func-returns-value]
        if dupes:
            raise ValueError(f"case ids must be unique; repeated: {', '.join(dupes)}")
        return cases

    @classmethod
    def load(cls, path: str | Path) -> Suite:
        """Read a suite file (YAML or JSON), resolving ``@file`` references.

        Raises:
            SuiteError: the file is missing or unreadable, a reference is missing, or the
                suite is invalid (every problem listed with its case id and field).
        """
        source = Path(path)
        data = _read_document(source)
        problems: list[str] = []
        resolved = _resolve_refs(data, source.parent, problems, where=[])
        if problems:
            raise SuiteError(source, problems)
        return cls.parse(resolved, source=source)

    @classmethod
    def parse(cls, data: Any, *, source: str | Path = "<suite>") -> Suite:
        """Validate a suite document already read (references resolved).

        Raises:
            SuiteError: every problem, with its case id and field.
        """
        try:
            suite = cls.model_validate(data)
        except ValidationError as exc:
            raise SuiteError(source, _problems(exc, data)) from None
        suite._source = str(source)
        return suite

    def case(self, case_id: str) -> Case:
        """The case with this id.

        Raises:
            KeyError: no such case (the message lists the known ids).
        """
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(
            f"suite {self.suite!r} has no case {case_id!r}; known: "
            + ", ".join(c.id for c in self.cases)
        )


class SuiteError(SAError):
    """A suite file that cannot be used; :attr:`problems` lists every problem."""

    def __init__(self, source: str | Path, problems: list[str]) -> None:
        self.source = str(source)
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"suite {self.source} has {len(problems)} problem(s):\n{lines}")


def _read_document(source: Path) -> Any:
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(source, [f"cannot read the file: {exc.strerror or exc}"]) from None
    try:
        if source.suffix == ".json":
            return json.loads(text)
        yaml: Any = importlib.import_module("yaml")  # the evals extra (pyyaml)

        return yaml.safe_load(text)
    except ValueError as exc:
        raise SuiteError(source, [f"not valid JSON: {exc}"]) from None
    except Exception as exc:  # yaml.YAMLError, without importing yaml at module level
        raise SuiteError(source, [f"not valid YAML: {exc}"]) from None


def _where(path: list[Any], data: Any) -> str:
    """``case 'id' field a.b`` for a location inside the document."""
    if len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
        cases = data.get("cases") if isinstance(data, dict) else None
        case_id: Any = path[1]
        if isinstance(cases, list) and path[1] < len(cases) and isinstance(cases[path[1]], dict):
            case_id = cases[path[1]].get("id", path[1])
        rest = ".".join(str(p) for p in path[2:]) or "(the case)"
        return f"case {case_id!r} field {rest}"
    return "field " + (".".join(str(p) for p in path) or "(the suite)")


def _problems(exc: ValidationError, data: Any) -> list[str]:
    return [f"{_where(list(e['loc']), data)}: {e['msg']}" for e in exc.errors()]


def _resolve_refs(value: Any, base: Path, problems: list[str], where: list[Any]) -> Any:
    """Replace ``"@relative/path"`` strings with the file's content.

    A ``.json`` file becomes its parsed value, except a case's input ``files`` (kept as text).
    """
    root = value
    return _resolve(value, base, problems, where, root)


def _resolve(value: Any, base: Path, problems: list[str], where: list[Any], root: Any) -> Any:
    if isinstance(value, dict):
        return {k: _resolve(v, base, problems, [*where, k], root) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, base, problems, [*where, i], root) for i, v in enumerate(value)]
    if not (isinstance(value, str) and value.startswith("@") and len(value) > 1):
        return value
    if " " in value:
        return value
    ref = base / value[1:]
    try:
        text = ref.read_text(encoding="utf-8")
    except OSError:
        problems.append(f"{_where(where, root)}: @file {value[1:]!r} not found (looked in {ref})")
        return value
    input_file = len(where) == 4 and where[0] == "cases" and where[2] == "files"
    if ref.suffix != ".json" or input_file:
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        problems.append(f"{_where(where, root)}: {value[1:]} is not valid JSON: {exc}")
        return value
