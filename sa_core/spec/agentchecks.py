"""Validation of agents: sides, session tools and the properties they read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.spec.agents import AgentDefinition, SessionToolBinding, SideConfig
from sa_core.spec.prompts import (
    PromptDefinition,
)
from sa_core.spec.schemas import ArgsSpec
from sa_core.spec.validatorbase import (
    ValidatorBase,
    blank,
    hint,
    schema_properties,
)

if TYPE_CHECKING:
    pass


class AgentChecks(ValidatorBase):
    """Checks of agents and their sides."""

    def check_agent(self, agent: AgentDefinition) -> None:
        """Check one agent: its type, sides, exposure and session tools."""
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
                    f"{hint(hook_id, self.hook_ids)}; define it with "
                    f"define_hook(id='{hook_id}', ...) or remove it from hooks."
                )
        for side_name, side in agent.sides():
            self.check_side(agent, f"side_{side_name}", side)

    def check_side(self, agent: AgentDefinition, side_name: str, side: SideConfig) -> None:
        """Check one side of an agent: its prompt, limits and session tool bindings."""
        where = f"agent '{agent.name}' {side_name}"
        if side.max_steps is not None and side.max_steps < 1:
            self.add(f"{where}: max_steps is {side.max_steps}; it must be at least 1.")
        if side.stop_tool_response_property is not None and side.stop_tool is None:
            self.add(
                f"{where}: stop_tool_response_property is set without stop_tool; set stop_tool "
                f"or remove the property."
            )
        for field_name in ("stop_tool", "stop_tool_response_property"):
            if blank(getattr(side, field_name)):
                self.add(f"{where}: {field_name} is an empty string; set it or leave it out.")
        prompt = self.prompts.get(side.prompt)
        if prompt is None:
            self.add(
                f"{where}: prompt '{side.prompt}' is not a prompt of the pack"
                f"{hint(side.prompt, self.prompts)}; define it with "
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
                if blank(getattr(binding, prop_field)):
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
            f"{hint(tool, offered, 'offered')}; add '{tool}' to that prompt's tools (the "
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
        props = schema_properties(args)
        if props is None or prop in props:
            return
        takes = f"takes {', '.join(sorted(props))}" if props else "takes no arguments"
        self.add(
            f"{where}: {label} is '{prop}', but {owner} has no such argument ({takes}); add "
            f"'{prop}' to the tool's args or fix the property name."
        )
