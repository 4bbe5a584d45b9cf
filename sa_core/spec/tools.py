"""ToolDefinition: a Python function a model can call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_serializer, field_validator

from sa_core.spec.base import SpecModel
from sa_core.spec.schemas import ArgsSpec, dump_args, is_model_class
from sa_core.spec.variables import VariableDefinition


def check_args(value: Any) -> ArgsSpec:
    """Validate a definition's ``args``: ``None``, a pydantic model class or a JSON schema."""
    if value is None or is_model_class(value) or isinstance(value, dict):
        return value  # type: ignore[no-any-return]
    raise ValueError("args must be a pydantic model class, a JSON Schema dict, or None")


class ToolDefinition(SpecModel):
    """A tool.

    ``execute(state, args)`` may be sync or async. ``args`` is an instance of the ``args``
    model (or the raw dict for JSON Schema args, or omitted when ``args`` is None). It may return
    a ``ToolResult``, a dict shaped like one, a str, or any JSON-serialisable value.
    """

    name: str
    description: str = ""
    args: Any = None
    execute: Callable[..., Any] = Field(exclude=True)
    variables: list[VariableDefinition] = Field(default_factory=list)
    execution_mode: Literal["local", "provider"] = "local"
    execution_provider: str | None = None
    uses: list[str] | None = None
    progress_argument: str | None = None
    requires_approval: bool = False
    retry_on_resume: bool = True
    """Whether a call a restart interrupted mid-run runs again (once). ``False``: the call gets
    the failed result ``Interrupted by a restart before it finished.`` instead."""
    replay: Literal["recorded", "execute", "forbid"] = "recorded"
    """What a replay (``runtime.replay_thread``) does with a call of this tool: ``recorded``
    serves the recorded result unless the replay asks ``tools="execute"``; ``execute`` runs the
    tool again even in a ``tools="recorded"`` replay (a pure function); ``forbid`` never runs it
    in a replay (a payment, an e-mail): the recorded result, else an error result."""

    _check = field_validator("args")(check_args)

    @field_serializer("args")
    def _dump(self, value: Any) -> Any:
        return dump_args(value)


def define_tool(
    *,
    name: str,
    description: str = "",
    args: ArgsSpec = None,
    execute: Callable[..., Any],
    variables: list[VariableDefinition] | list[dict[str, Any]] | None = None,
    requires_approval: bool = False,
    **fields: Any,
) -> ToolDefinition:
    """Define a tool.

    Example::

        class Args(BaseModel):
            city: str

        weather = define_tool(name="weather", description="Current weather.", args=Args,
                              execute=lambda state, args: f"Sunny in {args.city}")

    With ``requires_approval=True`` a call parks the thread until a human approves or denies
    it (``thread.approve`` / ``thread.deny``, or ``POST threads/{id}/approvals/{call_id}``).

    A prompt may list the tool with static per-prompt values, ``{"name": "weather",
    "options": {"units": "metric"}, "env": {"REGION": "eu"}}``: while the tool runs for that
    prompt, ``state.tool_options`` is the entry's ``options`` (a read-only mapping, empty when
    the entry gives none) and the entry's ``env`` gives defaults for ``state.env`` (the
    thread's, user's, instance's and agent's values still win)::

        def execute(state, args):
            units = state.tool_options.get("units", "metric")
            return f"20 degrees ({units}) in {args.city}"
    """
    return ToolDefinition(
        name=name,
        description=description,
        args=args,
        execute=execute,
        variables=variables or [],
        requires_approval=requires_approval,
        **fields,
    )
