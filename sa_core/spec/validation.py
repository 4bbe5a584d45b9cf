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

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sa_core.spec.agentchecks import AgentChecks
from sa_core.spec.agents import SideConfig
from sa_core.spec.embeddingchecks import embedding_problems
from sa_core.spec.mcp import mcp_server_problems
from sa_core.spec.prompts import (
    EnvPart,
    IncludePart,
    PromptDefinition,
    SubagentToolConfig,
    TextPart,
    tool_entry_name,
)
from sa_core.spec.remote import remote_agent_problems, remote_agent_warnings
from sa_core.spec.toolchecks import ToolChecks
from sa_core.spec.validatorbase import (
    ENDPOINT_PARAM,
    FUNCTION_NAME,
    LIFECYCLE_TOOL_NAMES,
    MAX_RECOMMENDED_PROMPT_LINES,
    MAX_RECOMMENDED_TOOLS,
    hint,
)

if TYPE_CHECKING:
    from sa_core.spec.packs import Pack

__all__ = [
    "LIFECYCLE_TOOL_NAMES",
    "MAX_RECOMMENDED_PROMPT_LINES",
    "MAX_RECOMMENDED_TOOLS",
    "pack_warnings",
    "validate_pack",
]


class _Validator(ToolChecks, AgentChecks):
    """Collects every problem of one pack. Use :func:`validate_pack`."""

    # -- entry point --------------------------------------------------------------------------

    def run(self) -> list[str]:
        self.check_pack()
        self.check_duplicates()
        self.check_models()
        self.check_tools()
        self.problems += mcp_server_problems(self.pack)
        self.problems += remote_agent_problems(self.pack)
        for prompt in self.pack.prompts:
            self.check_prompt(prompt)
        self.check_includes()
        self.check_secrets_in_prompts()
        for agent in self.pack.agents:
            self.check_agent(agent)
        self.check_schedules()
        self.problems += embedding_problems(self.pack, self.other_packs.values())
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
                        f"the pack{hint(entry, self.agents)}; add the agent or remove the entry."
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
            ("schedule", "schedules", [s.name for s in pack.schedules]),
            (
                "endpoint",
                "endpoints",
                [f"{e.method} /{ENDPOINT_PARAM.sub('{}', e.path)}" for e in pack.endpoints],
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
                        f"{hint(fallback, self.model_names)}; define it with "
                        f"define_model(name='{fallback}', ...) or remove it from fallbacks."
                    )

    def check_tools(self) -> None:
        for tool in self.pack.tools:
            if tool.name in LIFECYCLE_TOOL_NAMES:
                self.add(
                    f"tool '{tool.name}': this name is reserved for the runtime's subagent "
                    f"lifecycle tools ({', '.join(sorted(LIFECYCLE_TOOL_NAMES))}); rename the tool."
                )
            elif not FUNCTION_NAME.match(tool.name):
                self.add(
                    f"tool '{tool.name}': name is not a valid function name for model APIs; use "
                    f"1-64 letters, digits, '_' or '-'."
                )

    def check_schedules(self) -> None:
        for schedule in self.pack.schedules:
            if schedule.agent not in self.agents:
                self.add(
                    f"schedule '{schedule.name}': agent '{schedule.agent}' is not an agent of the "
                    f"pack{hint(schedule.agent, self.agents)}; a schedule runs an agent of its "
                    f"own pack, so define the agent or fix the name."
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
                        f"a prompt of the pack{hint(part.prompt, self.prompts)}; define it or "
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
    warnings += remote_agent_warnings(pack)
    return warnings
