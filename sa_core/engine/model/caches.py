"""Per-prompt caches: compiled system prompts and resolved tool tables, computed once.

The turn loop asks for them every step; each is built the first time a (package, prompt) pair
is used and kept for the runtime's life (a reloaded prompt object is recompiled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.engine.model.context import compile_prompt
from sa_core.engine.tools.tools import build_tool_table

if TYPE_CHECKING:
    from sa_core.engine.model.context import PromptTemplate
    from sa_core.engine.tools.tools import ToolTable
    from sa_core.registry import PackScope
    from sa_core.spec import PromptDefinition


class PromptCaches:
    """Compiled prompts and tool tables per ``(package, prompt)``."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], ToolTable] = {}
        self._templates: dict[tuple[str, str], PromptTemplate] = {}

    def template(self, scope: PackScope, prompt: PromptDefinition) -> PromptTemplate:
        """The compiled system prompt of a prompt (includes resolved once)."""
        key = (scope.package, prompt.name)
        cached = self._templates.get(key)
        if cached is None or prompt is not scope.prompts.get(prompt.name, prompt):
            cached = compile_prompt(prompt, scope.prompts.get)
            self._templates[key] = cached
        return cached

    def tool_table(self, scope: PackScope, prompt: PromptDefinition) -> ToolTable:
        """The resolved tools of a prompt (schemas computed once)."""
        key = (scope.package, prompt.name)
        cached = self._tables.get(key)
        if cached is None:
            cached = build_tool_table(scope, prompt)
            self._tables[key] = cached
        return cached

    def forget_tables(self) -> None:
        """Drop every tool table (a remote agent's card changed its tool's description)."""
        self._tables.clear()
