"""PromptDefinition, prompt parts and the tool entries a prompt lists."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from sa_core.spec.base import SpecModel, env_from_tenvs
from sa_core.spec.caching import PromptCaching
from sa_core.spec.schemas import ArgsSpec, dump_args, is_model_class
from sa_core.spec.variables import VariableDefinition

# ---------------------------------------------------------------------------------------------
# Prompt parts
# ---------------------------------------------------------------------------------------------


class TextPart(SpecModel):
    """Literal text."""

    type: Literal["text"]
    content: str


class IncludePart(SpecModel):
    """Another prompt's text, interpolated recursively."""

    type: Literal["include"]
    prompt: str


class EnvPart(SpecModel):
    """A variable's value, resolved per thread (secret variables are not allowed)."""

    type: Literal["env"]
    property: str


PromptPart = Annotated[TextPart | IncludePart | EnvPart, Field(discriminator="type")]


def _normalise_part(part: Any) -> Any:
    """Map the spec's legacy part shapes onto the current ones."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "string":
        return {"type": "text", "content": part.get("value", "")}
    if kind == "prompt":
        return {"type": "include", "prompt": part.get("id") or part.get("prompt")}
    if kind == "variable":
        return {"type": "env", "property": part.get("value") or part.get("property")}
    return part


# ---------------------------------------------------------------------------------------------
# Tool entries
# ---------------------------------------------------------------------------------------------


class SubpromptConfig(SpecModel):
    """A prompt (or handoff target) used as a tool, with argument mapping and result shaping."""

    name: str
    init_user_message_property: str | None = None
    init_attachments_property: str | None = None
    include_text_response: bool = True
    include_tool_calls: bool = True
    include_errors: bool = True
    optional: str | None = None


class PromptToolConfig(SpecModel):
    """A native tool with per-prompt env defaults and options."""

    name: str
    env: dict[str, str] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    optional: str | None = None
    requires_approval: bool = False


class ImmediateConfig(SpecModel):
    """The object form of ``immediate``: per-instance hints and scoped env transfer."""

    name_env: str | None = None
    description_env: str | None = None
    scoped_env: list[str] = Field(default_factory=list)


class ResumableConfig(SpecModel):
    """Persistent, addressable child instances.

    ``receives_messages`` keeps its snake_case spelling in the spec's JSON as well.
    """

    receives_messages: Literal["side_a", "side_b"] = Field(
        default="side_a", alias="receives_messages"
    )
    max_instances: int | None = None
    parent_communication: Literal["implicit", "explicit"] = "implicit"

    @model_validator(mode="before")
    @classmethod
    def _accept_camel(cls, data: Any) -> Any:
        if isinstance(data, dict) and "receivesMessages" in data:
            data = dict(data)
            data["receives_messages"] = data.pop("receivesMessages")
        return data


class SubagentToolConfig(SpecModel):
    """A ``dual_ai`` agent exposed as a tool: a subagent (see docs/subagents.md)."""

    name: str
    blocking: bool = True
    init_user_message_property: str | None = None
    init_attachments_property: str | None = None
    init_agent_name_property: str | None = None
    immediate: bool | ImmediateConfig = False
    optional: str | None = None
    resumable: Literal[False] | ResumableConfig = False
    description: str | None = None

    @property
    def is_resumable(self) -> bool:
        """Whether instances persist and are driven by the lifecycle tools."""
        return self.resumable is not False

    @property
    def parent_communication(self) -> Literal["implicit", "explicit"]:
        """How the child reports back: implicit unless a resumable config says explicit."""
        if isinstance(self.resumable, ResumableConfig):
            return self.resumable.parent_communication
        return "implicit"


ToolEntry = str | SubpromptConfig | PromptToolConfig | SubagentToolConfig

_SUBAGENT_KEYS = frozenset(
    {"blocking", "resumable", "immediate", "initAgentNameProperty", "init_agent_name_property"}
)
_TOOL_CONFIG_KEYS = frozenset({"env", "options", "tenvs", "requires_approval", "requiresApproval"})


def parse_tool_entry(entry: Any) -> ToolEntry:
    """Classify one entry of a prompt's ``tools`` list.

    Strings stay names. Objects with subagent keys are SubagentToolConfig, objects with
    ``env``/``options`` are PromptToolConfig, everything else is SubpromptConfig (the spec's
    rule: an object is a SubpromptConfig iff it has one of its keys).
    """
    if isinstance(entry, str | SubpromptConfig | PromptToolConfig | SubagentToolConfig):
        return entry
    if not isinstance(entry, dict):
        raise TypeError(f"a tools entry must be a name or an object, got {type(entry).__name__}")
    keys = set(entry)
    if keys & _SUBAGENT_KEYS:
        return SubagentToolConfig.model_validate(entry)
    if keys & _TOOL_CONFIG_KEYS:
        data = dict(entry)
        if "tenvs" in data:
            data.setdefault("env", data.pop("tenvs"))
        return PromptToolConfig.model_validate(data)
    return SubpromptConfig.model_validate(entry)


def tool_entry_name(entry: ToolEntry) -> str:
    """The name an entry refers to."""
    return entry if isinstance(entry, str) else entry.name


# ---------------------------------------------------------------------------------------------
# PromptDefinition
# ---------------------------------------------------------------------------------------------


class ReasoningSpec(SpecModel):
    """Requested reasoning for a prompt's model calls."""

    effort: Literal["low", "medium", "high"] | None = None
    max_tokens: int | None = None
    exclude: bool = False
    include: bool = False


class CompactionConfig(SpecModel):
    """How a prompt compacts a long history (``compaction=`` on :func:`define_prompt`).

    Attributes:
        trigger_tokens: compact when the next request would exceed this many input tokens.
        keep_last: how many of the newest messages stay verbatim after the compaction point.
        strategy: ``summarize`` (a model writes a summary of everything before the kept
            messages) or ``drop_tool_results`` (older tool results are replaced by a short stub).
        model: the model definition that writes summaries (the prompt's model when unset).
    """

    trigger_tokens: int = Field(gt=0)
    keep_last: int = Field(default=12, ge=1)
    strategy: Literal["summarize", "drop_tool_results"] = "summarize"
    model: str | None = None


def _compaction_error(prompt: str, error: ValidationError) -> str:
    """One readable line per problem, naming the prompt and the field."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "value"
        problems.append(f"prompt '{prompt}': compaction.{where}: {item['msg']}")
    return "; ".join(problems)


class PromptDefinition(SpecModel):
    """A system prompt with its model, tools and context policy.

    Attributes:
        compaction: how a long history is compacted before it is sent
            (:class:`CompactionConfig`; see docs/context-cost.md).
        parallel_tool_calls: whether the model may ask for several tool calls in one turn
            (the spec's default is ``False``; the engine runs the calls in order either way).
        provider_options: provider-specific options for this prompt's model calls, merged
            over each model definition's ``provider_options`` key by key (a key set here
            replaces the model's value for that key). ``providerOptions`` in JSON.
        output_schema: the shape of the prompt's final answer: a pydantic model class or a
            JSON Schema dict (``outputSchema`` in JSON). A turn of the prompt then ends with
            JSON that validates against it; see docs/structured-output.md.
        prompt_caching: overrides the model's ``prompt_caching`` for this prompt's calls, field
            by field (only the fields set here); ``False`` turns caching off for the prompt.
            See docs/context-cost.md.
    """

    name: str
    prompt: str | list[PromptPart] = ""
    model: str
    tool_description: str = ""
    include_chat: bool = False
    include_past_tools: bool = False
    parallel_tool_calls: bool = False
    tool_choice: Literal["auto", "none", "required"] = "auto"
    required_schema: Any = None
    output_schema: Any = None
    variables: list[VariableDefinition] = Field(default_factory=list)
    tools: list[ToolEntry] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    reasoning: ReasoningSpec | None = None
    recent_image_threshold: int = 10
    provider_options: dict[str, Any] = Field(default_factory=dict)
    hooks: list[str] = Field(default_factory=list)
    max_tokens: int | None = None
    expose_as_tool: bool | None = None
    prompt_caching: PromptCaching | None = None
    compaction: CompactionConfig | None = None

    _legacy_fields = model_validator(mode="before")(env_from_tenvs)

    @field_validator("prompt", mode="before")
    @classmethod
    def _parse_parts(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lstrip().startswith("[{"):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                return value
        if isinstance(value, list):
            return [_normalise_part(p) for p in value]
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _parse_tools(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [parse_tool_entry(v) for v in value]
        return value

    @field_validator("required_schema", "output_schema")
    @classmethod
    def _check_schema(cls, value: Any, info: ValidationInfo) -> ArgsSpec:
        if isinstance(value, dict) and info.field_name == "output_schema":
            from sa_core.spec.schemas import check_schema

            check_schema(value)
        if value is None or is_model_class(value) or isinstance(value, dict):
            return value  # type: ignore[no-any-return]
        raise ValueError(f"{info.field_name} must be a pydantic model class or a JSON Schema dict")

    @field_validator("compaction", mode="before")
    @classmethod
    def _check_compaction(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None or isinstance(value, CompactionConfig):
            return value
        name = info.data.get("name", "?")
        if not isinstance(value, dict):
            raise ValueError(
                f"prompt '{name}': compaction must be a dict such as "
                '{"trigger_tokens": 60000, "keep_last": 12, "strategy": "summarize"}'
            )
        try:
            return CompactionConfig.model_validate(value)
        except ValidationError as exc:
            raise ValueError(_compaction_error(name, exc)) from None

    @field_serializer("required_schema", "output_schema")
    def _dump_schema(self, value: Any) -> Any:
        return dump_args(value)

    @property
    def parts(self) -> list[TextPart | IncludePart | EnvPart]:
        """The prompt as a list of parts (a plain string is one text part)."""
        if isinstance(self.prompt, str):
            return [TextPart(type="text", content=self.prompt)] if self.prompt else []
        return list(self.prompt)

    def tool_names(self) -> list[str]:
        """Names referred to by the ``tools`` entries, in order."""
        return [tool_entry_name(t) for t in self.tools]


def define_prompt(**fields: Any) -> PromptDefinition:
    """Define a prompt. Keyword arguments are PromptDefinition fields (snake_case).

    Example::

        define_prompt(name="helper", model="fast", prompt="You help.", tools=["search"])
    """
    return PromptDefinition(**fields)
