"""Whole-pack validation: every problem in a definition graph at once, plus authoring warnings.

:func:`validate_pack` returns the problems that stop a pack from loading (unknown names, broken
session bindings, include cycles, secrets that would reach a model ...). It never stops at the
first one: a pack author fixes everything in one pass. :func:`pack_warnings` returns the
authoring guide's advice (bounded ``dual_ai`` sessions, small tool lists ...), which does not stop
a pack from loading.

Every message names the definition (``agent 'x'``, ``prompt 'y'``, ...), the field at fault and
says what to do. :meth:`sa_core.spec.Pack.validate` raises ``PackValidationError`` with these
problems; :meth:`sa_core.spec.Pack.warnings` returns the warnings.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sa_core.spec.agents import AgentDefinition, SessionToolBinding, SideConfig
from sa_core.spec.mcp import mcp_entry_problems, mcp_server_problems, split_mcp_name
from sa_core.spec.prompts import (
    EnvPart,
    ImmediateConfig,
    IncludePart,
    PromptDefinition,
    PromptToolConfig,
    ResumableConfig,
    SubagentToolConfig,
    SubpromptConfig,
    TextPart,
    ToolEntry,
    tool_entry_name,
)
from sa_core.spec.schemas import ArgsSpec, is_model_class, json_schema_of
from sa_core.spec.tools import ToolDefinition

if TYPE_CHECKING:
    from sa_core.spec.packs import Pack

__all__ = [
    "LIFECYCLE_TOOL_NAMES",
    "MAX_RECOMMENDED_PROMPT_LINES",
    "MAX_RECOMMENDED_TOOLS",
    "pack_warnings",
    "validate_pack",
]

LIFECYCLE_TOOL_NAMES: frozenset[str] = frozenset(
    {"subagent_create", "subagent_message", "subagents"}
)
"""Tools the runtime injects for resumable subagents; packs may not define or list them."""

MAX_RECOMMENDED_TOOLS = 8
"""The authoring guide's mega-agent threshold: models choose poorly past about eight tools."""

MAX_RECOMMENDED_PROMPT_LINES = 150
"""The authoring guide's context-dilution threshold for one prompt's own text."""

PROVIDER_TOOL_PREFIX = "provider:"
"""A ``tools`` entry ``provider:<tool>`` names a tool executed by the model's vendor."""

_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENDPOINT_PARAM = re.compile(r"\{[^}]*\}")

TargetKind = Literal["tool", "plugin_tool", "provider_tool", "prompt", "agent"]


@dataclass(frozen=True)
class _Target:
    """What a prompt's ``tools`` entry resolved to."""

    kind: TargetKind
    name: str
    tool: ToolDefinition | None = None
    prompt: PromptDefinition | None = None
    agent: AgentDefinition | None = None
    pack_name: str | None = None


def _hint(name: str, known: Iterable[str], label: str = "known") -> str:
    """Build a ``did you mean`` or ``known: ...`` suffix for an unknown-name message."""
    candidates = sorted(set(known))
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return f" (did you mean '{close[0]}'?)"
    if not candidates:
        return f" ({label}: none)"
    if len(candidates) <= 8:
        return f" ({label}: {', '.join(candidates)})"
    return ""


def _blank(value: str | None) -> bool:
    """Whether an optional string field was set to an empty or whitespace-only string."""
    return value is not None and not value.strip()


def _schema_properties(args: ArgsSpec) -> set[str] | None:
    """Return the argument names a schema declares, or ``None`` when they cannot be known.

    A tool without ``args`` takes no arguments (an empty set); a JSON Schema dict without
    ``properties`` is free-form (``None``, nothing to check against).
    """
    if args is None:
        return set()
    if isinstance(args, dict):
        props = args.get("properties")
        return set(props) if isinstance(props, dict) and props else None
    if is_model_class(args):
        names = set(json_schema_of(args).get("properties", {}))
        names.update(args.model_fields)
        return names
    return None


def _describe_agent(agent: AgentDefinition) -> str:
    exposed = "exposed" if agent.expose_as_tool else "not exposed"
    return f"a {agent.type} agent ({exposed})"


class _Validator:
    """Collects every problem of one pack. Use :func:`validate_pack`."""

    def __init__(self, pack: Pack, known_tools: Iterable[str], known_packs: Iterable[Pack]) -> None:
        self.pack = pack
        self.problems: list[str] = []
        self.known_tools = set(known_tools)
        self.other_packs: dict[str, Pack] = {}
        for other in known_packs:
            if other.name != pack.name:
                self.other_packs.setdefault(other.name, other)
        # First definition wins for lookups; duplicates are reported separately.
        self.agents: dict[str, AgentDefinition] = {}
        for agent in pack.agents:
            self.agents.setdefault(agent.name, agent)
        self.prompts: dict[str, PromptDefinition] = {}
        for prompt in pack.prompts:
            self.prompts.setdefault(prompt.name, prompt)
        self.tools: dict[str, ToolDefinition] = {}
        for tool in pack.tools:
            self.tools.setdefault(tool.name, tool)
        self.model_names = {m.name for m in pack.models}
        # Models may be shared: the registry falls back to other packs' models.
        self.shared_model_names = {m.name for p in self.other_packs.values() for m in p.models}
        self.hook_ids = {h.id for h in pack.hooks}

    def add(self, message: str) -> None:
        self.problems.append(message)

    # -- entry point --------------------------------------------------------------------------

    def run(self) -> list[str]:
        self.check_pack()
        self.check_duplicates()
        self.check_models()
        self.check_tools()
        self.problems += mcp_server_problems(self.pack)
        for prompt in self.pack.prompts:
            self.check_prompt(prompt)
        self.check_includes()
        self.check_secrets_in_prompts()
        for agent in self.pack.agents:
            self.check_agent(agent)
        return self.problems

    # -- pack-level ---------------------------------------------------------------------------

    def check_pack(self) -> None:
        name = self.pack.name
        if not name or not name.strip():
            self.add("pack: name is empty; give the pack a name (its entry-point name and URL id).")
        elif "/" in name or any(c.isspace() for c in name):
            suggestion = re.sub(r"[/\s]+", "_", name.strip())
            self.add(
                f"pack '{name}': name must not contain '/' or whitespace, since it is used in "
                f"'{name}/agent' references and in URLs; rename it (for example '{suggestion}')."
            )
        if self.pack.entry_agents is not None:
            for entry in self.pack.entry_agents:
                if entry not in self.agents:
                    self.add(
                        f"pack '{name}': entry_agents lists '{entry}', which is not an agent of "
                        f"the pack{_hint(entry, self.agents)}; add the agent or remove the entry."
                    )

    def check_duplicates(self) -> None:
        pack = self.pack
        groups: list[tuple[str, str, list[str]]] = [
            ("agent", "agents", [a.name for a in pack.agents]),
            ("prompt", "prompts", [p.name for p in pack.prompts]),
            ("model", "models", [m.name for m in pack.models]),
            ("tool", "tools", [t.name for t in pack.tools]),
            ("hook id", "hooks", [h.id for h in pack.hooks]),
            ("effect", "effects", [e.name for e in pack.effects]),
            (
                "endpoint",
                "endpoints",
                [f"{e.method} /{_ENDPOINT_PARAM.sub('{}', e.path)}" for e in pack.endpoints],
            ),
        ]
        for kind, field_name, names in groups:
            seen: dict[str, int] = {}
            for name in names:
                seen[name] = seen.get(name, 0) + 1
            for name, count in seen.items():
                if count > 1:
                    self.add(
                        f"pack '{pack.name}': {kind} '{name}' is defined {count} times in "
                        f"{field_name}; names must be unique within a pack, so rename or remove "
                        f"the extra definitions."
                    )

    def check_models(self) -> None:
        for model in self.pack.models:
            for fallback in model.fallbacks:
                if fallback == model.name:
                    self.add(
                        f"model '{model.name}': fallbacks lists the model itself; list other "
                        f"model definitions to try when this one fails."
                    )
                elif fallback not in self.model_names | self.shared_model_names:
                    self.add(
                        f"model '{model.name}': fallback '{fallback}' is not a model of the pack"
                        f"{_hint(fallback, self.model_names)}; define it with "
                        f"define_model(name='{fallback}', ...) or remove it from fallbacks."
                    )

    def check_tools(self) -> None:
        for tool in self.pack.tools:
            if tool.name in LIFECYCLE_TOOL_NAMES:
                self.add(
                    f"tool '{tool.name}': this name is reserved for the runtime's subagent "
                    f"lifecycle tools ({', '.join(sorted(LIFECYCLE_TOOL_NAMES))}); rename the tool."
                )
            elif not _FUNCTION_NAME.match(tool.name):
                self.add(
                    f"tool '{tool.name}': name is not a valid function name for model APIs; use "
                    f"1-64 letters, digits, '_' or '-'."
                )

    # -- prompts ------------------------------------------------------------------------------

    def check_prompt(self, prompt: PromptDefinition) -> None:
        where = f"prompt '{prompt.name}'"
        if prompt.model not in self.model_names | self.shared_model_names:
            self.add(
                f"{where}: model '{prompt.model}' is not a model of the pack"
                f"{_hint(prompt.model, self.model_names)}; define it with "
                f"define_model(name='{prompt.model}', ...) and add it to the pack's models."
            )
        summarizer = prompt.compaction.model if prompt.compaction is not None else None
        if summarizer is not None and summarizer not in self.model_names | self.shared_model_names:
            self.add(
                f"{where}: compaction.model '{summarizer}' is not a model of the pack"
                f"{_hint(summarizer, self.model_names)}; add it to the pack's models."
            )
        for hook_id in prompt.hooks:
            if hook_id not in self.hook_ids:
                self.add(
                    f"{where}: hook '{hook_id}' is not a hook of the pack"
                    f"{_hint(hook_id, self.hook_ids)}; define it with "
                    f"define_hook(id='{hook_id}', ...) or remove it from hooks."
                )
        if prompt.tool_choice == "required" and not prompt.tools:
            self.add(
                f"{where}: tool_choice='required' but the prompt offers no tools; add tools or "
                f"use tool_choice='auto'."
            )
        seen: set[str] = set()
        for entry in prompt.tools:
            name = tool_entry_name(entry)
            if name in seen:
                self.add(f"{where}: tools lists '{name}' more than once; keep a single entry.")
                continue
            seen.add(name)
            self.check_tool_entry(prompt, entry)

    def check_tool_entry(self, prompt: PromptDefinition, entry: ToolEntry) -> None:
        where = f"prompt '{prompt.name}'"
        name = tool_entry_name(entry)
        self.check_entry_strings(prompt, entry)
        if not name.strip():
            self.add(f"{where}: a tools entry has an empty name; name a tool, prompt or agent.")
            return
        if name in LIFECYCLE_TOOL_NAMES:
            self.add(
                f"{where}: tools lists '{name}', a subagent lifecycle tool; the runtime adds "
                f"lifecycle tools by itself when the prompt lists a resumable subagent, so remove "
                f"the entry."
            )
            return
        if split_mcp_name(name) is not None:
            self.problems += mcp_entry_problems(self.pack, where, name)
            return
        target = self.resolve(prompt, entry)
        if target is None:
            return
        if target.kind in ("prompt", "agent") and not _FUNCTION_NAME.match(target.name):
            self.add(
                f"{where}: tools entry '{name}' names a {target.kind} whose name is not a valid "
                f"function name for model APIs; rename the {target.kind} to 1-64 letters, digits, "
                f"'_' or '-'."
            )
        if isinstance(entry, PromptToolConfig) and target.kind in ("prompt", "agent"):
            self.add(
                f"{where}: tools entry '{name}' has env/options (a tool config) but names a "
                f"{target.kind}; tool configs apply to tools only, so use a plain name or a "
                f"subprompt config."
            )
        if isinstance(entry, SubagentToolConfig):
            self.check_subagent_entry(prompt, entry, target)
        elif target.agent is not None:
            self.check_agent_entry(prompt, entry, target.agent, name)
        if isinstance(entry, SubpromptConfig | SubagentToolConfig):
            self.check_init_properties(prompt, entry, target)

    def check_init_properties(
        self, prompt: PromptDefinition, entry: SubpromptConfig | SubagentToolConfig, target: _Target
    ) -> None:
        """Check ``init_*_property`` names against the target's ``required_schema``.

        The arguments of a prompt (or agent) called as a tool follow the ``required_schema`` of
        that prompt (or of the agent's side A prompt); without one the runtime builds the schema
        from the ``init_*`` properties themselves, so there is nothing to check.
        """
        schema_prompt = target.prompt
        if target.agent is not None:
            schema_prompt = self.side_a_prompt(target.agent, target.pack_name)
        if schema_prompt is None or schema_prompt.required_schema is None:
            return
        props = _schema_properties(schema_prompt.required_schema)
        if props is None:
            return
        fields = ["init_user_message_property", "init_attachments_property"]
        if isinstance(entry, SubagentToolConfig):
            fields.append("init_agent_name_property")
        for field_name in fields:
            value = getattr(entry, field_name)
            if value and value.strip() and value not in props:
                self.add(
                    f"prompt '{prompt.name}': tools entry '{entry.name}' sets "
                    f"{field_name}='{value}', but prompt '{schema_prompt.name}'.required_schema "
                    f"has no such property{_hint(value, props)}; add it to the schema or fix "
                    f"the name."
                )

    def side_a_prompt(
        self, agent: AgentDefinition, pack_name: str | None
    ) -> PromptDefinition | None:
        """Find the side A prompt of an agent of this pack or of another pack."""
        if pack_name is None or pack_name == self.pack.name:
            return self.prompts.get(agent.side_a.prompt)
        other = self.other_packs.get(pack_name)
        if other is None:
            return None
        return next((p for p in other.prompts if p.name == agent.side_a.prompt), None)

    def check_entry_strings(self, prompt: PromptDefinition, entry: ToolEntry) -> None:
        """Report optional string fields set to ``""``, which are almost always a mistake."""
        if isinstance(entry, str):
            return
        where = f"prompt '{prompt.name}': tools entry '{entry.name}'"
        fields: list[tuple[str, str | None]] = [("optional", entry.optional)]
        if isinstance(entry, SubpromptConfig | SubagentToolConfig):
            fields += [
                ("init_user_message_property", entry.init_user_message_property),
                ("init_attachments_property", entry.init_attachments_property),
            ]
        if isinstance(entry, SubagentToolConfig):
            fields.append(("init_agent_name_property", entry.init_agent_name_property))
            if isinstance(entry.immediate, ImmediateConfig):
                fields += [
                    ("immediate.name_env", entry.immediate.name_env),
                    ("immediate.description_env", entry.immediate.description_env),
                ]
                if any(not s.strip() for s in entry.immediate.scoped_env):
                    self.add(
                        f"{where}: immediate.scoped_env contains an empty name; list variable "
                        f"names only."
                    )
        for field_name, value in fields:
            if _blank(value):
                self.add(
                    f"{where}: {field_name} is an empty string; set it to a name or leave it out."
                )

    def resolve(self, prompt: PromptDefinition, entry: ToolEntry) -> _Target | None:
        """Resolve a tools entry; report it and return ``None`` when it names nothing."""
        where = f"prompt '{prompt.name}'"
        name = tool_entry_name(entry)
        if "/" in name:
            return self.resolve_qualified(prompt, name)
        if name.startswith(PROVIDER_TOOL_PREFIX):
            return self.resolve_provider_tool(prompt, name)
        if isinstance(entry, SubagentToolConfig):
            agent = self.agents.get(name)
            if agent is not None:
                return _Target("agent", name, agent=agent)
        if name in self.tools:
            return _Target("tool", name, tool=self.tools[name])
        if name in self.known_tools:
            return _Target("plugin_tool", name)
        if name in self.prompts:
            return _Target("prompt", name, prompt=self.prompts[name])
        if name in self.agents:
            return _Target("agent", name, agent=self.agents[name])
        homes = [p for p in self.other_packs.values() if name in p.entry_agent_names()]
        if len(homes) == 1:
            agent = next((a for a in homes[0].agents if a.name == name), None)
            if agent is not None:
                return _Target("agent", name, agent=agent, pack_name=homes[0].name)
        if len(homes) > 1:
            names = ", ".join(f"'{p.name}/{name}'" for p in homes)
            self.add(
                f"{where}: tools entry '{name}' is an entry agent of several packs; write one of "
                f"{names}."
            )
            return None
        known = [*self.tools, *self.known_tools, *self.prompts, *self.agents]
        self.add(
            f"{where}: tools entry '{name}' is not a tool, prompt or agent of the pack, nor a "
            f"plugin tool{_hint(name, known)}; define it, install the plugin that provides it, "
            f"or remove the entry."
        )
        return None

    def resolve_qualified(self, prompt: PromptDefinition, name: str) -> _Target | None:
        where = f"prompt '{prompt.name}'"
        pack_name, _, agent_name = name.rpartition("/")
        if pack_name == self.pack.name:
            agent = self.agents.get(agent_name)
            if agent is None:
                self.add(
                    f"{where}: tools entry '{name}' names agent '{agent_name}', which is not an "
                    f"agent of this pack{_hint(agent_name, self.agents)}; fix the name."
                )
                return None
            return _Target("agent", agent_name, agent=agent, pack_name=pack_name)
        other = self.other_packs.get(pack_name)
        if other is None:
            self.add(
                f"{where}: tools entry '{name}' names pack '{pack_name}', which is not installed"
                f"{_hint(pack_name, self.other_packs)}; install that pack or fix the name."
            )
            return None
        agents = {a.name: a for a in other.agents}
        entries = other.entry_agent_names()
        if agent_name not in agents:
            self.add(
                f"{where}: tools entry '{name}': pack '{pack_name}' has no agent "
                f"'{agent_name}'{_hint(agent_name, entries)}; fix the name."
            )
            return None
        if agent_name not in entries:
            self.add(
                f"{where}: tools entry '{name}' names a non-entry agent of pack '{pack_name}'; "
                f"only entry agents are reachable across packs (entry agents: "
                f"{', '.join(entries) or 'none'}). Use one of those or add '{agent_name}' to "
                f"that pack's entry_agents."
            )
            return None
        return _Target("agent", agent_name, agent=agents[agent_name], pack_name=pack_name)

    def resolve_provider_tool(self, prompt: PromptDefinition, name: str) -> _Target | None:
        tool_name = name[len(PROVIDER_TOOL_PREFIX) :]
        if name in self.known_tools or tool_name in self.known_tools:
            return _Target("provider_tool", name)
        models = [m for m in self.pack.models if m.name == prompt.model]
        if not models:
            return _Target("provider_tool", name)  # the unknown model is reported already
        if tool_name in models[0].provider_tools:
            return _Target("provider_tool", name)
        self.add(
            f"prompt '{prompt.name}': tools entry '{name}' names provider tool '{tool_name}', "
            f"but model '{prompt.model}' does not list it in provider_tools; add it there or "
            f"remove the entry."
        )
        return None

    def check_subagent_entry(
        self, prompt: PromptDefinition, entry: SubagentToolConfig, target: _Target
    ) -> None:
        where = f"prompt '{prompt.name}': subagent entry '{entry.name}'"
        if isinstance(entry.resumable, ResumableConfig):
            limit = entry.resumable.max_instances
            if limit is not None and limit < 1:
                self.add(
                    f"{where}: resumable.max_instances is {limit}; it must be at least 1 "
                    f"(leave it out for no limit)."
                )
        agent = target.agent
        if agent is None or agent.type != "dual_ai":
            what = _describe_agent(agent) if agent is not None else f"a {target.kind}"
            if entry.is_resumable:
                self.add(
                    f"{where}: resumable is set but '{entry.name}' is {what}; only dual_ai "
                    f"agents can be resumable subagents. Target an exposed dual_ai agent or "
                    f"drop resumable."
                )
            else:
                self.add(
                    f"{where}: a subagent config must target an exposed dual_ai agent, but "
                    f"'{entry.name}' is {what}; make the agent dual_ai with expose_as_tool=True, "
                    f"or list it as a plain name (handoff, prompt or tool)."
                )
            return
        if not agent.expose_as_tool:
            self.add(
                f"{where}: agent '{agent.name}' is not exposed as a tool; set "
                f"expose_as_tool=True (and tool_description) on it to use it as a subagent."
            )

    def check_agent_entry(
        self, prompt: PromptDefinition, entry: ToolEntry, agent: AgentDefinition, name: str
    ) -> None:
        """Check a plain-name or subprompt-config entry naming an agent (subagent or handoff)."""
        if agent.expose_as_tool:
            return
        use = "a subagent (dual_ai)" if agent.type == "dual_ai" else "a handoff target (ai_human)"
        self.add(
            f"prompt '{prompt.name}': tools entry '{name}' names agent '{agent.name}', "
            f"{use}, which is not exposed as a tool; set expose_as_tool=True and a "
            f"tool_description on the agent, or remove the entry."
        )

    def check_includes(self) -> None:
        graph: dict[str, list[str]] = {}
        for prompt in self.pack.prompts:
            targets: list[str] = []
            for part in prompt.parts:
                if not isinstance(part, IncludePart):
                    continue
                if part.prompt in self.prompts:
                    targets.append(part.prompt)
                else:
                    self.add(
                        f"prompt '{prompt.name}': includes prompt '{part.prompt}', which is not "
                        f"a prompt of the pack{_hint(part.prompt, self.prompts)}; define it or "
                        f"remove the include part."
                    )
            graph.setdefault(prompt.name, targets)
        for cycle in _find_cycles(graph):
            self.add(
                f"prompt '{cycle[0]}': include cycle {' -> '.join(cycle)}; an include chain "
                f"must not come back to a prompt already being included, so remove one of these "
                f"include parts."
            )

    def check_secrets_in_prompts(self) -> None:
        secrets: dict[str, str] = {}
        declarers: list[tuple[str, Any]] = [
            *((f"tool '{t.name}'", t.variables) for t in self.pack.tools),
            *((f"prompt '{p.name}'", p.variables) for p in self.pack.prompts),
            *((f"agent '{a.name}'", a.variables) for a in self.pack.agents),
        ]
        for who, variables in declarers:
            for variable in variables:
                if variable.type == "secret":
                    secrets.setdefault(variable.name, who)
        if not secrets:
            return
        for prompt in self.pack.prompts:
            for part in prompt.parts:
                if isinstance(part, EnvPart) and part.property in secrets:
                    self.add(
                        f"prompt '{prompt.name}': env part '{part.property}' names a secret "
                        f"variable (declared type='secret' by {secrets[part.property]}); secrets "
                        f"must never reach a model, so read it only inside a tool with "
                        f"state.env('{part.property}') and remove the env part."
                    )

    # -- agents -------------------------------------------------------------------------------

    def check_agent(self, agent: AgentDefinition) -> None:
        where = f"agent '{agent.name}'"
        if not agent.name.strip():
            self.add("agent: name is empty; give every agent a unique name.")
        elif "/" in agent.name:
            self.add(
                f"{where}: name must not contain '/', which separates pack and agent in "
                f"'pack/agent' references; rename it."
            )
        if agent.type == "dual_ai" and agent.side_b is None:
            self.add(
                f"{where}: type='dual_ai' needs side_b (both sides are AI); add "
                f"side_b={{'prompt': ...}} or use type='ai_human'."
            )
        if agent.expose_as_tool and not (agent.tool_description or "").strip():
            self.add(
                f"{where}: expose_as_tool=True needs a tool_description, which the calling model "
                f"reads to decide when to use it; add one."
            )
        if agent.max_session_turns is not None and agent.max_session_turns < 1:
            self.add(
                f"{where}: max_session_turns is {agent.max_session_turns}; it must be at least 1."
            )
        for hook_id in agent.hooks:
            if hook_id not in self.hook_ids:
                self.add(
                    f"{where}: hook '{hook_id}' is not a hook of the pack"
                    f"{_hint(hook_id, self.hook_ids)}; define it with "
                    f"define_hook(id='{hook_id}', ...) or remove it from hooks."
                )
        for side_name, side in agent.sides():
            self.check_side(agent, f"side_{side_name}", side)

    def check_side(self, agent: AgentDefinition, side_name: str, side: SideConfig) -> None:
        where = f"agent '{agent.name}' {side_name}"
        if side.max_steps is not None and side.max_steps < 1:
            self.add(f"{where}: max_steps is {side.max_steps}; it must be at least 1.")
        if side.stop_tool_response_property is not None and side.stop_tool is None:
            self.add(
                f"{where}: stop_tool_response_property is set without stop_tool; set stop_tool "
                f"or remove the property."
            )
        for field_name in ("stop_tool", "stop_tool_response_property"):
            if _blank(getattr(side, field_name)):
                self.add(f"{where}: {field_name} is an empty string; set it or leave it out.")
        prompt = self.prompts.get(side.prompt)
        if prompt is None:
            self.add(
                f"{where}: prompt '{side.prompt}' is not a prompt of the pack"
                f"{_hint(side.prompt, self.prompts)}; define it with "
                f"define_prompt(name='{side.prompt}', ...) or fix the name."
            )
        bindings: list[tuple[str, SessionToolBinding | None]] = [
            ("session_stop", side.session_stop),
            ("session_fail", side.session_fail),
            ("session_status", side.session_status),
        ]
        for label, binding in bindings:
            if binding is None:
                continue
            if not binding.name.strip():
                self.add(f"{where}: {label} has an empty tool name; name a tool the prompt offers.")
                continue
            for prop_field in ("message_property", "attachments_property"):
                if _blank(getattr(binding, prop_field)):
                    self.add(
                        f"{where}: {label}.{prop_field} is an empty string; set it to an "
                        f"argument name or leave it out."
                    )
            if prompt is None:
                continue
            if self.check_offered(where, label, binding.name, prompt):
                for prop_field in ("message_property", "attachments_property"):
                    self.check_property(
                        where, f"{label}.{prop_field}", binding.name, getattr(binding, prop_field)
                    )
        if (
            side.stop_tool
            and side.stop_tool.strip()
            and prompt is not None
            and self.check_offered(where, "stop_tool", side.stop_tool, prompt)
        ):
            self.check_property(
                where,
                "stop_tool_response_property",
                side.stop_tool,
                side.stop_tool_response_property,
            )

    def check_offered(self, where: str, label: str, tool: str, prompt: PromptDefinition) -> bool:
        """Report a session/stop binding whose tool the side's prompt does not offer."""
        offered = prompt.tool_names()
        if tool in offered:
            return True
        self.add(
            f"{where}: {label} tool '{tool}' is not offered by prompt '{prompt.name}'"
            f"{_hint(tool, offered, 'offered')}; add '{tool}' to that prompt's tools (the "
            f"runtime does not create binding tools)."
        )
        return False

    def check_property(self, where: str, label: str, tool: str, prop: str | None) -> None:
        """Report a binding property missing from the bound tool's argument schema."""
        if prop is None or not prop.strip():
            return
        if tool in self.tools:
            args: ArgsSpec = self.tools[tool].args
            owner = f"tool '{tool}'"
        elif tool in self.prompts and self.prompts[tool].required_schema is not None:
            args = self.prompts[tool].required_schema
            owner = f"prompt '{tool}'.required_schema"
        else:
            return
        props = _schema_properties(args)
        if props is None or prop in props:
            return
        takes = f"takes {', '.join(sorted(props))}" if props else "takes no arguments"
        self.add(
            f"{where}: {label} is '{prop}', but {owner} has no such argument ({takes}); add "
            f"'{prop}' to the tool's args or fix the property name."
        )


def _find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every distinct cycle reached by depth-first search, as ``[a, b, a]`` paths.

    Each cycle is rotated to start at its smallest name so the same loop is reported once.
    """
    cycles: list[list[str]] = []
    seen_keys: set[tuple[str, ...]] = set()
    state: dict[str, int] = {}  # 1 = on the stack, 2 = finished
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            mark = state.get(nxt, 0)
            if mark == 0:
                visit(nxt)
            elif mark == 1:
                loop = stack[stack.index(nxt) :]
                start = loop.index(min(loop))
                rotated = loop[start:] + loop[:start]
                key = tuple(rotated)
                if key not in seen_keys:
                    seen_keys.add(key)
                    cycles.append([*rotated, rotated[0]])
        stack.pop()
        state[node] = 2

    for node in graph:
        if state.get(node, 0) == 0:
            visit(node)
    return cycles


def validate_pack(
    pack: Pack, *, known_tools: Iterable[str] = (), known_packs: Iterable[Pack] = ()
) -> list[str]:
    """Check a pack's whole definition graph and return every problem found.

    Args:
        pack: the pack to check.
        known_tools: names of tools provided outside the pack (plugins, provider built-ins).
        known_packs: other packs; their entry agents may be referenced as ``pack/agent``.

    Returns:
        One message per problem, each naming the definition and field at fault and saying what
        to do; empty when the pack is sound.

    Example::

        problems = validate_pack(pack, known_tools=["web_search"])
        for problem in problems:
            print(problem)

    """
    return _Validator(pack, known_tools, known_packs).run()


# ---------------------------------------------------------------------------------------------
# Warnings: the authoring guide's advice
# ---------------------------------------------------------------------------------------------


def _text_lines(prompt: PromptDefinition) -> int:
    return sum(part.content.count("\n") + 1 for part in prompt.parts if isinstance(part, TextPart))


def _side_may_loop(side: SideConfig) -> bool:
    return (
        not side.stop_on_response
        and not side.stop_tool
        and side.session_stop is None
        and side.session_fail is None
        and side.max_steps is None
    )


def pack_warnings(pack: Pack) -> list[str]:
    """Return the authoring guide's warnings for a pack; none stops the pack from loading.

    Warned about:

    * a ``dual_ai`` agent missing ``session_stop``, ``session_fail`` or ``max_session_turns``
      (with none of them it may never end);
    * a ``dual_ai`` agent whose side B runs the same prompt as side A (side B needs a real job);
    * a side that never stops on its own (``stop_on_response=False`` with no stop tool, session
      binding or ``max_steps``);
    * a prompt offering more than :data:`MAX_RECOMMENDED_TOOLS` tools;
    * a prompt whose own text is longer than :data:`MAX_RECOMMENDED_PROMPT_LINES` lines;
    * a prompt used as a tool by another prompt but without a ``tool_description``;
    * an agent and a prompt that share a name which a ``tools`` entry uses (the entry means
      the prompt, a surprise for whoever meant the agent). The shared name alone is fine: the
      ``sa new`` template names an agent after its prompt.

    Args:
        pack: the pack to inspect.

    Returns:
        One message per warning.

    """
    warnings: list[str] = []
    for agent in pack.agents:
        where = f"agent '{agent.name}'"
        if agent.type == "dual_ai":
            sides = [side for _, side in agent.sides()]
            has_stop = any(s.session_stop is not None for s in sides)
            has_fail = any(s.session_fail is not None for s in sides)
            has_cap = agent.max_session_turns is not None
            if not (has_stop or has_fail or has_cap):
                warnings.append(
                    f"{where}: dual_ai agent has no session_stop, no session_fail and no "
                    f"max_session_turns, so it may never end; bind the tools that end the "
                    f"session and set a finite max_session_turns."
                )
            else:
                missing = [
                    label
                    for label, ok in (
                        ("session_stop", has_stop),
                        ("session_fail", has_fail),
                        ("max_session_turns", has_cap),
                    )
                    if not ok
                ]
                if missing:
                    warnings.append(
                        f"{where}: dual_ai agent has no {' and no '.join(missing)}; the authoring "
                        f"guide asks every dual_ai agent to name its session_stop and "
                        f"session_fail tools and to set a finite max_session_turns."
                    )
            if agent.side_b is not None and agent.side_b.prompt == agent.side_a.prompt:
                warnings.append(
                    f"{where}: side_b uses the same prompt as side_a ('{agent.side_a.prompt}'); "
                    f"give side_b a real job (review, QA, judging) or make the agent a "
                    f"single-side prompt."
                )
        for side_name, side in agent.sides():
            if _side_may_loop(side):
                warnings.append(
                    f"{where} side_{side_name}: stop_on_response=False with no stop_tool, "
                    f"session binding or max_steps, so its turn may never end; add one of them."
                )
    used_as_tool: dict[str, str] = {}
    prompt_names = {p.name for p in pack.prompts}
    for prompt in pack.prompts:
        for entry in prompt.tools:
            name = tool_entry_name(entry)
            if name in prompt_names and not isinstance(entry, SubagentToolConfig):
                used_as_tool.setdefault(name, prompt.name)
    tool_names = {t.name for t in pack.tools}
    for prompt in pack.prompts:
        where = f"prompt '{prompt.name}'"
        count = len(prompt.tools)
        if count > MAX_RECOMMENDED_TOOLS:
            warnings.append(
                f"{where}: offers {count} tools; models choose poorly past "
                f"~{MAX_RECOMMENDED_TOOLS} tools, so split the work into subprompts or subagents."
            )
        lines = _text_lines(prompt)
        if lines > MAX_RECOMMENDED_PROMPT_LINES:
            warnings.append(
                f"{where}: its text is {lines} lines long; past ~{MAX_RECOMMENDED_PROMPT_LINES} "
                f"lines context dilutes, so split it across subprompts or subagents."
            )
        caller = used_as_tool.get(prompt.name)
        if caller and prompt.name not in tool_names and not prompt.tool_description.strip():
            warnings.append(
                f"{where}: used as a tool by prompt '{caller}' but has no tool_description; "
                f"add one so the calling model knows when to use it."
            )
    entry_names = {
        tool_entry_name(entry)
        for prompt in pack.prompts
        for entry in prompt.tools
        if not isinstance(entry, SubagentToolConfig)
    }
    for agent in pack.agents:
        if agent.name in prompt_names and agent.name in entry_names:
            warnings.append(
                f"agent '{agent.name}': prompt '{agent.name}' has the same name, so a tools "
                f"entry '{agent.name}' runs the prompt as a subprompt, not the agent; rename "
                f"the agent or the prompt."
            )
    return warnings
