"""VariableDefinition: configuration values tools, prompts and agents declare."""

from __future__ import annotations

from typing import Literal

from sa_core.spec.base import SpecModel

VariableType = Literal["text", "secret"]


class VariableDefinition(SpecModel):
    """A variable a tool, prompt or agent reads through ``state.env(name)``.

    Attributes:
        name: the env property name.
        type: ``text`` or ``secret``. Secret values are readable by tools only: they never reach
            a model, a log or an API response.
        required: the thread cannot be created without a value.
        scoped: not inherited from a parent thread's env (subagents).
        description: what the value is for; shown when it is missing.
    """

    name: str
    type: VariableType = "text"
    required: bool = False
    scoped: bool = False
    description: str = ""
