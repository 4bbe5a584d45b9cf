"""HookDefinition: a spec lifecycle hook defined inside a pack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from sa_core.spec.base import DEFERRED, SpecModel

HookName = Literal[
    "filter_messages",
    "prefilter_llm_history",
    "before_create_message",
    "after_create_message",
    "before_update_message",
    "after_update_message",
    "before_store_tool_result",
    "after_tool_call_success",
    "after_tool_call_failure",
]


class HookDefinition(SpecModel):
    """A hook referenced by ``id`` from a prompt's (else the agent's) ``hooks`` list.

    ``execute(state, *hook_args)`` may be sync or async; transforming hooks return the new value
    (``None`` keeps the input).
    """

    model_config = DEFERRED

    id: str
    hook: HookName
    execute: Callable[..., Any] = Field(exclude=True)
    description: str = ""


def define_hook(
    *, id: str, hook: HookName, execute: Callable[..., Any], **fields: Any
) -> HookDefinition:
    """Define a hook. Example: ``define_hook(id="trim", hook="filter_messages", execute=fn)``."""
    return HookDefinition(id=id, hook=hook, execute=execute, **fields)
