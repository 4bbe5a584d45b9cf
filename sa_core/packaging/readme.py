"""The README of a packed distribution, built from the closure's descriptions."""

from __future__ import annotations

from sa_core.packaging.closure import Closure
from sa_core.packaging.identity import PackIdentity
from sa_core.spec import VariableDefinition

__all__ = ["render_readme", "summary_line"]


def summary_line(closure: Closure) -> str:
    """Return a one-line description for the package index (core metadata ``Summary``)."""
    agent = closure.agent
    text = agent.description or agent.tool_description or agent.title or ""
    text = " ".join(text.split())
    if not text:
        text = f"The {agent.name} agent, packed for Standard Agents."
    return text if len(text) <= 200 else text[:197].rstrip() + "..."


def _variables(closure: Closure) -> list[tuple[VariableDefinition, str]]:
    found: list[tuple[VariableDefinition, str]] = []
    seen: set[str] = set()
    owners = [(a.variables, f"agent `{a.name}`") for a in closure.agents]
    owners += [(p.variables, f"prompt `{p.name}`") for p in closure.prompts]
    owners += [(t.variables, f"tool `{t.name}`") for t in closure.tools]
    for variables, owner in owners:
        for variable in variables:
            if variable.name not in seen:
                seen.add(variable.name)
                found.append((variable, owner))
    return found


def _described(name: str, text: str | None) -> str:
    text = " ".join((text or "").split())
    return f"- `{name}`: {text}" if text else f"- `{name}`"


def render_readme(
    identity: PackIdentity, closure: Closure, *, license_id: str | None, core_version: str
) -> str:
    """Markdown for ``README.md``."""
    agent = closure.agent
    title = agent.title or agent.name
    qualified = f"{identity.package_id}/{agent.name}"
    lines = [
        f"# {identity.distribution}",
        "",
        f"**{title}**: {summary_line(closure)}",
        "",
        f"A [Standard Agents](https://pypi.org/project/standard-agents/) pack: package id "
        f"`{identity.package_id}`, entry agent `{agent.name}`. Packed by `sa pack` "
        f"(standard-agents {core_version}) from pack `{closure.pack.name}`.",
        "",
        "## Install",
        "",
        "```sh",
        f"pip install {identity.distribution}",
        f"sa packs    # lists {identity.package_id}",
        "```",
        "",
        "## Use",
        "",
        "```python",
        "from sa_core import Runtime",
        "",
        "async with Runtime() as runtime:",
        f'    thread = await runtime.create_thread("{qualified}")',
        '    await thread.send_message("Hello")',
        "```",
        "",
        f"Other packs can use it as a subagent or handoff target by listing `{qualified}` in a "
        "prompt's tools.",
        "",
        "## What is inside",
        "",
        "### Agents",
        "",
    ]
    for item in closure.agents:
        role = "entry agent" if item is agent else closure.roles.get(item.name, "internal")
        text = " ".join((item.description or item.tool_description or "").split())
        lines.append(f"- `{item.name}` ({role}, {item.type})" + (f": {text}" if text else ""))
    if closure.tools:
        lines += ["", "### Tools", ""]
        lines += [_described(t.name, t.description) for t in closure.tools]
    lines += ["", "### Prompts", ""]
    lines += [_described(p.name, p.tool_description) for p in closure.prompts]
    lines += ["", "### Models", ""]
    lines += [f"- `{m.name}`: `{m.model}` on provider `{m.provider}`" for m in closure.models]
    for kind, label in (("hooks", "Hooks"), ("effects", "Effects")):
        items = closure.items(kind)
        if items:
            lines += ["", f"### {label}", ""]
            for item in items:
                key = item.id if kind == "hooks" else item.name
                lines.append(_described(key, item.description))
    if closure.endpoints:
        lines += ["", "### Thread endpoints", ""]
        for endpoint in closure.endpoints:
            path = f"{endpoint.method} /api/packages/{identity.package_id}/threads/{{id}}/"
            lines.append(_described(path + endpoint.path, endpoint.description))
    variables = _variables(closure)
    if variables:
        lines += ["", "### Variables", ""]
        for variable, owner in variables:
            flags = [variable.type] + (["required"] if variable.required else []) + [owner]
            note = f": {variable.description}" if variable.description else ""
            lines.append(f"- `{variable.name}` ({', '.join(flags)}){note}")
    if closure.external:
        lines += ["", "### Needs from the environment", ""]
        lines += [f"- {text}" for text in closure.external]
    lines += ["", "## License", ""]
    if license_id:
        lines.append(f"{license_id}; see `LICENSE`.")
    else:
        lines.append("No license was given.")
    return "\n".join(lines) + "\n"
