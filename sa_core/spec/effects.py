"""EffectDefinition: deferred work scheduled on a thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, field_serializer, field_validator

from sa_core.spec.base import DEFERRED, SpecModel
from sa_core.spec.schemas import ArgsSpec, dump_args
from sa_core.spec.tools import check_args


class EffectDefinition(SpecModel):
    """An effect: ``execute(state, args)`` runs later, after ``state.schedule_effect``."""

    model_config = DEFERRED

    name: str
    description: str = ""
    args: Any = None
    execute: Callable[..., Any] = Field(exclude=True)

    _check = field_validator("args")(check_args)

    @field_serializer("args")
    def _dump(self, value: Any) -> Any:
        return dump_args(value)


def define_effect(
    *, name: str, description: str = "", args: ArgsSpec = None, execute: Callable[..., Any]
) -> EffectDefinition:
    """Define an effect."""
    return EffectDefinition(name=name, description=description, args=args, execute=execute)
