"""Secret redaction: which variables are secret, and scrubbing their values out of text.

Tools may read secrets; whatever they return is scrubbed before it is stored, so a secret never
reaches a model, a log or an API response.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sa_core.registry import PackScope, Registry
    from sa_core.store import ThreadRow


class SecretNames:
    """Which variables are secret: names per package (computed once) plus secret-typed env.

    It redacts nothing itself: :func:`redact` and :mod:`sa_core.engine.scrub` replace the
    values of the variables it names.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._secrets: dict[str, frozenset[str]] = {}

    def secret_names(self, scope: PackScope, row: ThreadRow) -> frozenset[str]:
        """Variables declared secret in the package or by plugin tools, plus secret-typed env."""
        declared = self._secrets.get(scope.package)
        if declared is None:
            names = {
                v.name for a in scope.agents.values() for v in a.variables if v.type == "secret"
            }
            names |= {
                v.name for p in scope.prompts.values() for v in p.variables if v.type == "secret"
            }
            tools = [*scope.tools.values(), *self.registry.global_tools.values()]
            names |= {v.name for t in tools for v in t.variables if v.type == "secret"}
            declared = frozenset(names)
            self._secrets[scope.package] = declared
        if not row.env_types:
            return declared
        return declared | {k for k, v in row.env_types.items() if v == "secret"}


MIN_SECRET_LENGTH = 4
"""Secret values shorter than this are left alone (too likely to occur by chance)."""
REDACTED = "[redacted]"
"""What stands in for a secret value wherever one is scrubbed."""


def redact(text: str, values: Iterable[str]) -> str:
    """Replace each of ``values`` (a thread's secret values) in ``text`` with ``[redacted]``.

    Tools may read secrets; whatever they return is scrubbed before it is stored, so a
    secret never reaches a model, a log or an API response.
    """
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text
