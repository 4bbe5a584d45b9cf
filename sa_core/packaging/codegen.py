"""Write the generated files of a packed distribution: definitions module, pyproject, README.

Agents, prompts and models are written as data (``AgentDefinition.model_validate({...})``).
Tools, hooks, effects and endpoints are written the same way with their functions and argument
models referenced from the copied source modules; a definition whose function has no
module-level name (a lambda, a closure) is referenced whole from the module that holds it.
Every written definition is checked to validate back to an equal object before it is used.
"""

from __future__ import annotations

import json
import math
import pprint
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic.alias_generators import to_camel

from sa_core.packaging.closure import KINDS
from sa_core.packaging.errors import PackagingError
from sa_core.packaging.identity import PackIdentity, split_author
from sa_core.packaging.sources import Ref, SourcePlan

__all__ = ["DefinitionsWriter", "ProjectMeta", "render_init", "render_pyproject"]

_CLASSES: dict[str, str] = {
    "agents": "AgentDefinition",
    "prompts": "PromptDefinition",
    "models": "ModelDefinition",
    "tools": "ToolDefinition",
    "hooks": "HookDefinition",
    "effects": "EffectDefinition",
    "endpoints": "ThreadEndpointDefinition",
    "mcp_servers": "MCPServerDefinition",
    "schedules": "ScheduleDefinition",
    "remote_agents": "RemoteAgentDefinition",
}
_OBJECT_FIELDS: dict[str, tuple[str, ...]] = {
    "prompts": ("required_schema", "output_schema"),
    "tools": ("execute", "args"),
    "hooks": ("execute",),
    "effects": ("execute", "args"),
    "endpoints": ("handler",),
}
_PICK = '''

def _pick(items: Any, name: str) -> Any:
    """The definition called ``name`` (a hook: its ``id``) in a list from a copied module."""
    for item in items:
        if getattr(item, "id", None) == name or getattr(item, "name", None) == name:
            return item
    raise LookupError(f"no definition named {name!r} in the copied source")
'''


NOT_PACKAGES = ("*.__pycache__", "*.__pycache__.*")
"""Package names the generated distribution never holds (``find`` would take caches for them)."""
NOT_DATA = ("*__pycache__*", "*.pyc", "*.pyo", "*.egg-info*", "*.DS_Store")
"""Files under the package that are never its data (matched against the whole path)."""


class _Code:
    """Python source that ``pprint`` writes as it is."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _renderable(value: Any) -> bool:
    """Whether ``value`` is data that ``repr`` writes as valid Python."""
    if value is None or isinstance(value, bool | int | str | _Code):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_renderable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _renderable(v) for k, v in value.items())
    return False


def _drop_default_nones(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    """Leave out ``None`` values of fields whose default is ``None`` (serialisers keep them)."""
    defaults = {
        (info.alias or to_camel(name)): info.default for name, info in cls.model_fields.items()
    }
    return {k: v for k, v in data.items() if not (v is None and defaults.get(k, ...) is None)}


def _key(kind: str, item: Any) -> str:
    return str(item.id if kind == "hooks" else item.name)


class DefinitionsWriter:
    """Writes ``definitions.py`` for one packed distribution.

    Args:
        plan: where the closure's code is copied to.

    """

    def __init__(self, plan: SourcePlan) -> None:
        self.plan = plan
        self.aliases: dict[str, str] = {}
        self.picks = False

    def expr(self, ref: Ref) -> _Code:
        """Return the expression reaching a referenced object."""
        alias = self.aliases.get(ref.module)
        if alias is None:
            stem = ref.module.removeprefix(f"{self.plan.module}._vendor.")
            stem = stem.removeprefix(f"{self.plan.module}.")
            alias = "src_" + stem.replace(".", "_")
            while alias in self.aliases.values():
                alias += "_"
            self.aliases[ref.module] = alias
        text = f"{alias}.{ref.attribute}"
        if ref.pick is not None:
            self.picks = True
            text = f"_pick({text}, {ref.pick!r})"
        return _Code(text)

    def definition(self, kind: str, item: Any) -> str:
        """Python source building one definition.

        Raises:
            PackagingError: it can be neither written as data nor found in a copied module.

        """
        key = _key(kind, item)
        refs: dict[str, Ref] = {}
        for name in _OBJECT_FIELDS.get(kind, ()):
            value = getattr(item, name)
            if value is None or isinstance(value, dict):
                continue
            ref = self.plan.ref(value)
            if ref is None:
                return self._located(kind, item, key)
            refs[name] = ref
        cls = type(item)
        for compact in (True, False):
            data = item.model_dump(by_alias=True, exclude_defaults=compact, exclude=set(refs))
            if compact:
                data = _drop_default_nones(cls, data)
            live, code = dict(data), dict(data)
            for name, ref in refs.items():
                alias = cls.model_fields[name].alias or to_camel(name)
                live[alias] = getattr(item, name)
                code[alias] = self.expr(ref)
            if _renderable(data) and cls.model_validate(live) == item:
                body = pprint.pformat(code, width=92, sort_dicts=False)
                return f"{_CLASSES[kind]}.model_validate(\n{textwrap.indent(body, '    ')}\n)"
        return self._located(kind, item, key)

    def _located(self, kind: str, item: Any, key: str) -> str:
        ref = self.plan.locate(kind, item, key)
        if ref is None:
            raise PackagingError(
                f"{kind[:-1]} '{key}' cannot be packed: its code has no module-level name and "
                f"no copied module holds the definition. Define it (or its function) at module "
                f"level in the pack's source."
            )
        return repr(self.expr(ref))

    def render(self, items: Mapping[str, Sequence[Any]], pack_fields: Mapping[str, Any]) -> str:
        """Return the whole ``definitions.py``.

        Args:
            items: definitions by kind (see :data:`~sa_core.packaging.closure.KINDS`).
            pack_fields: other ``Pack`` fields (``name``, ``entry_agents``, ``version`` ...).

        """
        blocks: list[str] = []
        used: set[str] = {"Pack"}
        for kind in KINDS:
            values = [self.definition(kind, item) for item in items.get(kind, [])]
            if any(v.startswith(_CLASSES[kind]) for v in values):
                used.add(_CLASSES[kind])
            inner = "".join(f"{textwrap.indent(v, '    ')},\n" for v in values)
            blocks.append(f"{kind.upper()} = [\n{inner}]\n" if values else f"{kind.upper()} = []\n")
        arguments = [f"    name={pack_fields['name']!r},"]
        arguments += [f"    {kind}={kind.upper()}," for kind in KINDS]
        arguments += [f"    {k}={v!r}," for k, v in pack_fields.items() if k != "name"]
        head = [
            f'"""Definitions of pack {pack_fields["name"]!r}, written by ``sa pack``.',
            "",
            "Agents, prompts and models are plain data: edit them here. Code (tool and hook",
            "functions, argument models, endpoint handlers) stays in the source modules copied",
            "under ``_vendor/``. Pack again with ``sa pack <project dir> --agent <agent>``.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
        ]
        if self.picks:
            head += ["from typing import Any", ""]
        names = "".join(f"    {name},\n" for name in sorted(used))
        head.append(f"from sa_core.spec import (\n{names})")
        if self.aliases:
            head.append("")
            head += [
                f"import {module} as {alias}" for module, alias in sorted(self.aliases.items())
            ]
        text = "\n".join(head) + "\n" + (_PICK if self.picks else "") + "\n"
        text += "\n".join(blocks) + "\npack = Pack(\n" + "\n".join(arguments) + "\n)\n"
        compile(text, "definitions.py", "exec")
        return text


def render_init(module_doc: str) -> str:
    """Return the packed package's ``__init__.py``: re-exports ``pack`` from ``definitions``."""
    doc = module_doc.replace('"""', "'''")
    return f'"""{doc}"""\n\nfrom .definitions import pack\n\n__all__ = ["pack"]\n'


# ---------------------------------------------------------------------------------------------
# pyproject.toml
# ---------------------------------------------------------------------------------------------


@dataclass
class ProjectMeta:
    """What ``pyproject.toml`` says about a packed (or unpacked) distribution."""

    distribution: str
    version: str
    module: str
    description: str
    entry_points: dict[str, str]
    dependencies: list[str] = field(default_factory=list)
    author: str | None = None
    license_expression: str | None = None
    license_file: bool = False
    requires_python: str = ">=3.11"
    identity: PackIdentity | None = None
    extra_modules: list[str] = field(default_factory=list)


def toml_value(value: Any) -> str:
    """Return a TOML value for strings, numbers, booleans, lists and inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, Iterable):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def render_pyproject(meta: ProjectMeta) -> str:
    """Return the generated ``pyproject.toml`` (setuptools, PEP 621 and PEP 639 metadata)."""
    lines = [
        "[build-system]",
        'requires = ["setuptools>=77"]',
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        f"name = {toml_value(meta.distribution)}",
        f"version = {toml_value(meta.version)}",
        f"description = {toml_value(meta.description)}",
        'readme = "README.md"',
        f"requires-python = {toml_value(meta.requires_python)}",
    ]
    if meta.license_expression:
        lines.append(f"license = {toml_value(meta.license_expression)}")
    if meta.license_file:
        lines.append('license-files = ["LICENSE"]')
    author = split_author(meta.author)
    if author:
        lines.append(f"authors = [{toml_value(author)}]")
    lines.append('keywords = ["standard-agents", "standardagent", "sa-pack"]')
    lines.append("dependencies = [")
    lines += [f"  {toml_value(d)}," for d in meta.dependencies]
    lines += ["]", "", '[project.entry-points."sa.packs"]']
    lines += [
        f"{toml_value(name)} = {toml_value(value)}" for name, value in meta.entry_points.items()
    ]
    modules = [meta.module, *meta.extra_modules]
    lines += ["", "[tool.setuptools.packages.find]"]
    lines.append(f"include = {toml_value([n for m in modules for n in (m, m + '.*')])}")
    lines.append(f"exclude = {toml_value(list(NOT_PACKAGES))}")
    lines += ["", "[tool.setuptools.package-data]"]
    lines += [f'{toml_value(m)} = ["**/*"]' for m in modules]
    # Bytecode caches and build leftovers are never data of the distribution (setuptools would
    # otherwise take a __pycache__ folder for a package it was not told about).
    lines += ["", "[tool.setuptools.exclude-package-data]"]
    lines.append(f'"*" = {toml_value(list(NOT_DATA))}')
    if meta.identity is not None:
        identity = meta.identity
        lines += [
            "",
            "# The pack's identity, kept through unpack -> edit -> pack (also in _pack.json).",
            "[tool.standard-agents]",
            f"package-id = {toml_value(identity.package_id)}",
            f"module = {toml_value(identity.module)}",
            f"agent = {toml_value(identity.agent)}",
            f"entry-agents = {toml_value(identity.entry_agents)}",
            f"version = {toml_value(identity.version)}",
            f"packed-at = {toml_value(identity.packed_at)}",
        ]
    return "\n".join(lines) + "\n"
