"""Matching stored tool calls against a ``tools`` expectation: names and partial arguments.

``exact``: these calls, in this order, nothing else. ``in_order``: these calls in this order,
others allowed between. ``any_order``: these calls in any order, others allowed. ``subset``: no
call outside the list (not all need to happen). ``forbid``: none of these calls.
A spec's arguments are partial: every key given must match (nested dicts partially too); keys
not given are not compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.evals.suite import CallSpec, ToolsExpect
    from sa_core.evals.view import CallView


@dataclass(frozen=True)
class Wanted:
    """A call a spec names: the tool, and the arguments it must carry."""

    name: str
    args: Mapping[str, Any]

    def __str__(self) -> str:
        return (
            f"{self.name}({json.dumps(dict(self.args), sort_keys=True)})"
            if self.args
            else self.name
        )

    def matches(self, call: CallView) -> bool:
        """Whether ``call`` is this tool with (at least) these arguments."""
        return call.name == self.name and partial_match(self.args, call.arguments)


def wanted(spec: CallSpec) -> Wanted:
    """A ``calls`` entry as a :class:`Wanted`: a name, or ``{name: {arguments}}``."""
    if isinstance(spec, str):
        return Wanted(spec, {})
    ((name, args),) = spec.items()
    return Wanted(name, dict(args or {}))


def partial_match(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` holds everything ``expected`` gives (dicts partially, lists whole)."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and partial_match(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(partial_match(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if expected == actual:
        return True
    scalar = (str, int, float)
    if isinstance(expected, scalar) and isinstance(actual, scalar):
        return not isinstance(expected, bool) and str(expected) == str(actual)
    return False


def _names(calls: Sequence[CallView]) -> str:
    return "[" + ", ".join(c.name for c in calls) + "]" if calls else "no calls"


def match_tools(expect: ToolsExpect, calls: Sequence[CallView]) -> tuple[bool, str]:
    """Score ``calls`` against a ``tools`` expectation: (passed, the reason)."""
    specs = [wanted(s) for s in expect.calls]
    forbidden = [wanted(s) for s in expect.forbid]
    for bad in forbidden:
        hit = next((c for c in calls if bad.matches(c)), None)
        if hit is not None:
            return False, f"forbidden call {bad} was made ({hit.name} {hit.arguments})"
    check = {"exact": _exact, "in_order": _in_order, "any_order": _any_order, "subset": _subset}
    return check[expect.match](specs, list(calls))


def _exact(specs: list[Wanted], calls: list[CallView]) -> tuple[bool, str]:
    if len(specs) != len(calls):
        return (
            False,
            f"expected exactly {len(specs)} call(s) {list(map(str, specs))}, got {_names(calls)}",
        )
    for i, (spec, call) in enumerate(zip(specs, calls, strict=True)):
        if not spec.matches(call):
            return False, f"call {i + 1}: expected {spec}, got {call.name} {call.arguments}"
    return True, f"exactly {len(specs)} call(s) as listed"


def _in_order(specs: list[Wanted], calls: list[CallView]) -> tuple[bool, str]:
    position = 0
    for spec in specs:
        while position < len(calls) and not spec.matches(calls[position]):
            position += 1
        if position == len(calls):
            return False, f"{spec} not found in order among {_names(calls)}"
        position += 1
    return True, f"{len(specs)} call(s) in order"


def _any_order(specs: list[Wanted], calls: list[CallView]) -> tuple[bool, str]:
    used: set[int] = set()

    def place(k: int) -> bool:
        if k == len(specs):
            return True
        for i, call in enumerate(calls):
            if i not in used and specs[k].matches(call):
                used.add(i)
                if place(k + 1):
                    return True
                used.discard(i)
        return False

    if place(0):
        return True, f"{len(specs)} call(s) in any order"
    missing = [str(s) for s in specs if not any(s.matches(c) for c in calls)]
    return False, f"missing {missing or 'a distinct call per entry'} among {_names(calls)}"


def _subset(specs: list[Wanted], calls: list[CallView]) -> tuple[bool, str]:
    for call in calls:
        if not any(spec.matches(call) for spec in specs):
            return False, f"call {call.name} {call.arguments} is outside the allowed list"
    return True, f"{len(calls)} call(s), all allowed"
