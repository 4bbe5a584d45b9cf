"""AgentDefinition, SideConfig and SessionToolBinding."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from sa_core.spec.base import SpecModel, env_from_tenvs
from sa_core.spec.variables import VariableDefinition


class SessionToolBinding(SpecModel):
    """A tool that ends (stop / fail) or annotates (status) a session.

    Accepts the string form (a tool name) and the object form.
    """

    name: str
    message_property: str | None = None
    attachments_property: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _string_form(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data


Side = Literal["a", "b"]
"""A thread's two sides: ``a``, the agent's, and ``b``, the user's (or a second AI's).
The engine maps them to stored roles (:data:`sa_core.engine.flowtypes.SIDE_ROLE`)."""


class SideConfig(SpecModel):
    """One side of an agent."""

    prompt: str
    label: str | None = None
    stop_on_response: bool = True
    stop_tool: str | None = None
    stop_tool_response_property: str | None = None
    max_steps: int | None = None
    session_stop: SessionToolBinding | None = None
    session_fail: SessionToolBinding | None = None
    session_status: SessionToolBinding | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_aliases(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (
            ("endSessionTool", "sessionStop"),
            ("end_session_tool", "session_stop"),
            ("failSessionTool", "sessionFail"),
            ("fail_session_tool", "session_fail"),
            ("statusTool", "sessionStatus"),
            ("status_tool", "session_status"),
        ):
            if old in data:
                value = data.pop(old)
                if new not in data and new.replace("_", "") not in data:
                    data[new] = value
        return data

    def session_tool_names(self) -> list[str]:
        """Names of the session-binding tools this side declares."""
        return [b.name for b in (self.session_stop, self.session_fail, self.session_status) if b]


ClientSettingsPolicy = Literal["apply", "ignore", "refuse"]
"""What a served agent does with sampling and length settings a client sends (``temperature``,
``max_tokens``, ...): apply them to that turn's model calls, accept but ignore them, or refuse
the request naming every such field."""


class ServingPolicy(SpecModel):
    """How an agent treats what clients of the served protocols (OpenAI ``/v1``, ...) ask for.

    Example::

        define_agent(name="triage", side_a={"prompt": "main"},
                     serving={"client_settings": "refuse", "client_tools": False})
    """

    client_settings: ClientSettingsPolicy | None = None
    """``apply`` | ``ignore`` | ``refuse``; ``None``: the server's default (``sa serve
    --client-settings``, itself ``apply`` unless set)."""
    client_tools: bool = True
    """Whether tools a client declares are offered to the agent's model for that turn (their
    calls are returned to the client); ``False`` refuses them with a 400."""


class AgentDefinition(SpecModel):
    """An agent: the top-level conversation orchestrator."""

    name: str
    type: Literal["ai_human", "dual_ai"] = "ai_human"
    side_a: SideConfig
    side_b: SideConfig | None = None
    max_session_turns: int | None = None
    """Maximum total turns across both sides in a session; only applies to ``dual_ai``."""
    title: str | None = None
    description: str | None = None
    icon: str | None = None
    expose_as_tool: bool = False
    tool_description: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    variables: list[VariableDefinition] = Field(default_factory=list)
    hooks: list[str] = Field(default_factory=list)
    serving: ServingPolicy = Field(default_factory=ServingPolicy)
    """What clients of the served protocols may change for a turn (see :class:`ServingPolicy`)."""
    primary: bool = True
    package_name: str | None = None
    version: str | None = None
    author: str | None = None
    license: str | None = None

    _legacy_fields = model_validator(mode="before")(env_from_tenvs)

    def sides(self) -> list[tuple[Side, SideConfig]]:
        """The AI-driven sides: side A, and side B for ``dual_ai``."""
        result: list[tuple[Side, SideConfig]] = [("a", self.side_a)]
        if self.type == "dual_ai" and self.side_b is not None:
            result.append(("b", self.side_b))
        return result


def define_agent(**fields: Any) -> AgentDefinition:
    """Define an agent. Nested configs may be plain dicts.

    Example::

        define_agent(name="support", side_a={"prompt": "support_main"})
    """
    return AgentDefinition(**fields)
