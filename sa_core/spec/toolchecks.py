"""Validation of prompts and their tool entries: every name resolves, every option fits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.spec.agents import AgentDefinition
from sa_core.spec.mcp import mcp_entry_problems, split_mcp_name
from sa_core.spec.prompts import (
    ImmediateConfig,
    PromptDefinition,
    PromptToolConfig,
    ResumableConfig,
    SubagentToolConfig,
    SubpromptConfig,
    ToolEntry,
    tool_entry_name,
)
from sa_core.spec.validatorbase import (
    FUNCTION_NAME,
    LIFECYCLE_TOOL_NAMES,
    PROVIDER_TOOL_PREFIX,
    Target,
    ValidatorBase,
    blank,
    describe_agent,
    hint,
    schema_properties,
)

if TYPE_CHECKING:
    pass


class ToolChecks(ValidatorBase):
    """Checks of prompts and their tool entries."""

    def check_prompt(self, prompt: PromptDefinition) -> None:
        """Check one prompt: its model, parts, tool entries and output schema."""
        where = f"prompt '{prompt.name}'"
        if prompt.model not in self.model_names | self.shared_model_names:
            self.add(
                f"{where}: model '{prompt.model}' is not a model of the pack"
                f"{hint(prompt.model, self.model_names)}; define it with "
                f"define_model(name='{prompt.model}', ...) and add it to the pack's models."
            )
        summarizer = prompt.compaction.model if prompt.compaction is not None else None
        if summarizer is not None and summarizer not in self.model_names | self.shared_model_names:
            self.add(
                f"{where}: compaction.model '{summarizer}' is not a model of the pack"
                f"{hint(summarizer, self.model_names)}; add it to the pack's models."
            )
        for hook_id in prompt.hooks:
            if hook_id not in self.hook_ids:
                self.add(
                    f"{where}: hook '{hook_id}' is not a hook of the pack"
                    f"{hint(hook_id, self.hook_ids)}; define it with "
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
        """Check one tool entry of a prompt: its name resolves and its options fit the target."""
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
        if target.kind in ("prompt", "agent") and not FUNCTION_NAME.match(target.name):
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
        self, prompt: PromptDefinition, entry: SubpromptConfig | SubagentToolConfig, target: Target
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
        props = schema_properties(schema_prompt.required_schema)
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
                    f"has no such property{hint(value, props)}; add it to the schema or fix "
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
            if blank(value):
                self.add(
                    f"{where}: {field_name} is an empty string; set it to a name or leave it out."
                )

    def resolve(self, prompt: PromptDefinition, entry: ToolEntry) -> Target | None:
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
                return Target("agent", name, agent=agent)
        remote = self.remote_agents.get(name)
        if remote is not None and name not in self.agents:
            return Target("agent", name, agent=remote.as_agent(), remote=remote)
        if name in self.tools:
            return Target("tool", name, tool=self.tools[name])
        if name in self.known_tools:
            return Target("plugin_tool", name)
        if name in self.prompts:
            return Target("prompt", name, prompt=self.prompts[name])
        if name in self.agents:
            return Target("agent", name, agent=self.agents[name])
        homes = [p for p in self.other_packs.values() if name in p.entry_agent_names()]
        if len(homes) == 1:
            agent = next((a for a in homes[0].agents if a.name == name), None)
            if agent is not None:
                return Target("agent", name, agent=agent, pack_name=homes[0].name)
        if len(homes) > 1:
            names = ", ".join(f"'{p.name}/{name}'" for p in homes)
            self.add(
                f"{where}: tools entry '{name}' is an entry agent of several packs; write one of "
                f"{names}."
            )
            return None
        known = [*self.tools, *self.known_tools, *self.prompts, *self.agents, *self.remote_agents]
        self.add(
            f"{where}: tools entry '{name}' is not a tool, prompt or agent of the pack, nor a "
            f"plugin tool{hint(name, known)}; define it, install the plugin that provides it, "
            f"or remove the entry."
        )
        return None

    def resolve_qualified(self, prompt: PromptDefinition, name: str) -> Target | None:
        """Resolve a ``pack/agent`` entry against the other packs, reporting what is missing."""
        where = f"prompt '{prompt.name}'"
        pack_name, _, agent_name = name.rpartition("/")
        if pack_name == self.pack.name:
            agent = self.agents.get(agent_name)
            if agent is None:
                self.add(
                    f"{where}: tools entry '{name}' names agent '{agent_name}', which is not an "
                    f"agent of this pack{hint(agent_name, self.agents)}; fix the name."
                )
                return None
            return Target("agent", agent_name, agent=agent, pack_name=pack_name)
        other = self.other_packs.get(pack_name)
        if other is None:
            self.add(
                f"{where}: tools entry '{name}' names pack '{pack_name}', which is not installed"
                f"{hint(pack_name, self.other_packs)}; install that pack or fix the name."
            )
            return None
        agents = {a.name: a for a in other.agents}
        entries = other.entry_agent_names()
        if agent_name not in agents:
            self.add(
                f"{where}: tools entry '{name}': pack '{pack_name}' has no agent "
                f"'{agent_name}'{hint(agent_name, entries)}; fix the name."
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
        return Target("agent", agent_name, agent=agents[agent_name], pack_name=pack_name)

    def resolve_provider_tool(self, prompt: PromptDefinition, name: str) -> Target | None:
        """Resolve a ``provider:`` tool entry against the provider tools known."""
        tool_name = name[len(PROVIDER_TOOL_PREFIX) :]
        if name in self.known_tools or tool_name in self.known_tools:
            return Target("provider_tool", name)
        models = [m for m in self.pack.models if m.name == prompt.model]
        if not models:
            return Target("provider_tool", name)  # the unknown model is reported already
        if tool_name in models[0].provider_tools:
            return Target("provider_tool", name)
        self.add(
            f"prompt '{prompt.name}': tools entry '{name}' names provider tool '{tool_name}', "
            f"but model '{prompt.model}' does not list it in provider_tools; add it there or "
            f"remove the entry."
        )
        return None

    def check_subagent_entry(
        self, prompt: PromptDefinition, entry: SubagentToolConfig, target: Target
    ) -> None:
        """Check the options of an entry naming a subagent."""
        where = f"prompt '{prompt.name}': subagent entry '{entry.name}'"
        if isinstance(entry.resumable, ResumableConfig):
            limit = entry.resumable.max_instances
            if limit is not None and limit < 1:
                self.add(
                    f"{where}: resumable.max_instances is {limit}; it must be at least 1 "
                    f"(leave it out for no limit)."
                )
        if (
            target.remote is not None
            and isinstance(entry.resumable, ResumableConfig)
            and entry.resumable.receives_messages == "side_b"
        ):
            self.add(
                f"{where}: resumable.receives_messages is 'side_b', but '{entry.name}' is a "
                f"remote agent, which has one side; leave receives_messages out."
            )
        agent = target.agent
        if agent is None or agent.type != "dual_ai":
            what = describe_agent(agent) if agent is not None else f"a {target.kind}"
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
