"""``sa pack``: turn one agent's closure into a standalone, installable distribution.

Layout of the generated project (``--out``, by default ``./packed/<distribution>``)::

    pyproject.toml          name, version, author, license, the sa.packs entry point, identity
    README.md               built from the descriptions
    LICENSE                 from the SPDX id
    <module>/__init__.py    from .definitions import pack
    <module>/definitions.py agents, prompts and models as data; code referenced from _vendor
    <module>/_pack.json     the identity (package id, distribution, version, packed-at ...)
    <module>/_vendor/...    the source modules the closure's code comes from
    dist/                   the sdist and the wheel, checked with twine

Packing the same agent again (from its source, from an unpacked project or into the previous
output directory) keeps the identity and bumps the patch version, unless ``--version`` says
otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sa_core.errors import DefinitionNotFoundError, PackValidationError
from sa_core.packaging.builder import build_distributions, twine_check
from sa_core.packaging.closure import KINDS, Closure, compute_closure
from sa_core.packaging.codegen import DefinitionsWriter, ProjectMeta, render_init, render_pyproject
from sa_core.packaging.errors import PackagingError
from sa_core.packaging.identity import (
    IDENTITY_FILE,
    PackIdentity,
    bump_version,
    check_distribution_name,
    default_distribution,
    module_for,
    newer,
    read_identity,
    split_author,
)
from sa_core.packaging.licenses import license_text, metadata_expression
from sa_core.packaging.readme import render_readme, summary_line
from sa_core.packaging.sources import SourcePlan, find_pack_module
from sa_core.packaging.verify import environment
from sa_core.spec import Pack
from sa_core.spec.stores import store_config

__all__ = ["PackResult", "pack_agent", "select_pack"]

DEFAULT_VERSION = "0.1.0"


@dataclass
class PackResult:
    """What ``sa pack`` produced.

    Attributes:
        identity: the distribution's identity (names, version ...).
        project: the generated project directory.
        closure: the definitions that went in.
        vendored: the source units copied in, one line each.
        requirements: the distribution's requirements.
        license_id: the SPDX id, if any.
        previous_version: the version this one follows, when it is a re-pack.
        files: the sdist and the wheel, when built.
        check_report: ``twine check`` output, when built.

    """

    identity: PackIdentity
    project: Path
    closure: Closure
    vendored: list[str]
    requirements: list[str]
    license_id: str | None
    previous_version: str | None = None
    files: list[Path] = field(default_factory=list)
    check_report: str | None = None


def select_pack(packs: list[Pack], agent: str, pack_name: str | None = None) -> Pack:
    """Return the pack holding ``agent`` (``pack_name`` chooses when several do).

    Raises:
        DefinitionNotFoundError: no pack (or not exactly one) defines the agent.

    """
    candidates = [p for p in packs if pack_name is None or p.name == pack_name]
    if pack_name is not None and not candidates:
        raise DefinitionNotFoundError("pack", pack_name, [p.name for p in packs])
    holders = [p for p in candidates if any(a.name == agent for a in p.agents)]
    if len(holders) == 1:
        return holders[0]
    if holders:
        raise DefinitionNotFoundError(
            "agent",
            agent,
            hint=f"Packs {', '.join(p.name for p in holders)} all define it; pass --pack.",
        )
    raise DefinitionNotFoundError("agent", agent, [a.name for p in candidates for a in p.agents])


def _previous_output_version(out: Path) -> str | None:
    """Return the version recorded by an earlier ``sa pack`` into ``out``, if any."""
    pyproject = out / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    version = data.get("tool", {}).get("standard-agents", {}).get("version")
    return str(version) if version else None


def _latest(versions: list[str]) -> str | None:
    latest: str | None = None
    for candidate in versions:
        if latest is None or newer(candidate, latest):
            latest = candidate
    return latest


def _next_version(agent_version: str | None, latest: str | None) -> str:
    """Return the agent's version, or the next one when an earlier pack already used it."""
    if latest is not None and (agent_version is None or not newer(agent_version, latest)):
        return bump_version(latest)
    return agent_version or DEFAULT_VERSION


def _check_out_dir(out: Path, plan: SourcePlan) -> None:
    sources = [u.path for u in plan.units.values()]
    if plan.generated is not None:
        sources.append(plan.generated)
    for source in sources:
        if source.resolve().is_relative_to(out.resolve()) or out.resolve() == source.resolve():
            raise PackagingError(
                f"--out {out} holds the source being packed ({source}); pack into another "
                f"directory."
            )
    if out.exists() and any(out.iterdir()) and _previous_output_version(out) is None:
        raise PackagingError(
            f"--out {out} exists and is not an earlier output of sa pack; choose an empty or new "
            f"directory."
        )


def _verify(project: Path, package_id: str) -> None:
    """Import and validate the generated project in a fresh interpreter.

    The interpreter writes no bytecode (``-B``): the project is the user's to edit and build,
    so importing it must leave no ``__pycache__`` behind.
    """
    command = [sys.executable, "-B", "-m", "sa_core.packaging.verify", str(project)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=project, check=False)
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PackagingError(
            f"the generated project does not load:\n{result.stdout}{result.stderr}"
        ) from None
    if "error" in report:
        raise PackagingError(f"the generated project does not load: {report['error']}")
    packs = {p["name"]: p for p in report["packs"]}
    problems = packs.get(package_id, {}).get("problems", ["its pack was not found"])
    if problems:
        raise PackValidationError(package_id, problems)


def pack_agent(
    source: str,
    agent: str,
    *,
    version: str | None = None,
    license_id: str | None = None,
    author: str | None = None,
    out: Path | None = None,
    pack_name: str | None = None,
    package_id: str | None = None,
    build: bool = True,
    isolated: bool | None = None,
) -> PackResult:
    """Pack one agent of the packs found in ``source`` into a distribution.

    Args:
        source: a module, ``.py`` file or project directory (as for ``sa validate``).
        agent: the agent to pack; it becomes the only entry agent.
        version: the version; by default the agent's, bumped when already packed.
        license_id: the SPDX id; by default the agent's (else the pack's) ``license``.
        author: ``Name <email>``; by default the agent's (else the pack's) ``author``.
        out: the project directory to write; by default ``./packed/<distribution>``.
        pack_name: the source pack, when several define ``agent``.
        package_id: the packed pack's name (entry-point name); by default the agent's name.
        build: also build the sdist and wheel and run ``twine check``.
        isolated: build in an isolated environment (default: only when needed).

    Raises:
        PackagingError: the agent cannot be packed; the message says why.
        PackValidationError: the source pack, or the packed one, has problems.
        PackLoadError: ``source`` does not load.

    """
    from sa_core import __version__ as core_version
    from sa_core.packloader import load_packs_from

    pack = select_pack(load_packs_from(source), agent, pack_name)
    known_tools, known_packs = environment([pack.name])
    pack.validate(known_tools=known_tools, known_packs=known_packs)
    closure = compute_closure(pack, agent, known_tools=known_tools)
    definition = closure.agent

    top = find_pack_module(pack).__name__.split(".")[0]
    top_file = getattr(sys.modules[top], "__file__", None)
    earlier = read_identity(Path(top_file).parent) if top_file else None
    distribution = check_distribution_name(
        definition.package_name
        or (earlier.distribution if earlier else None)
        or default_distribution(agent),
        fix=f"set package_name on agent '{agent}'",
    )
    module = earlier.module if earlier else module_for(distribution)
    package_id = package_id or (earlier.package_id if earlier else None) or agent
    if "/" in package_id or any(c.isspace() or c == "=" for c in package_id):
        raise PackagingError(f"package id '{package_id}' must not contain '/', '=' or spaces.")
    out = (out or Path.cwd() / "packed" / distribution).resolve()
    earlier_version = earlier.version if earlier else None
    previous_version = _latest([v for v in (earlier_version, _previous_output_version(out)) if v])
    version = version or _next_version(definition.version, previous_version)
    author = author or definition.author or pack.author
    license_id = license_id or definition.license or pack.license
    expression = metadata_expression(license_id) if license_id else None

    plan = SourcePlan(pack, module, _objects(closure))
    _check_out_dir(out, plan)
    packed_agent = definition.model_copy(
        update={
            "package_name": distribution,
            "version": version,
            "author": author,
            "license": license_id,
        }
    )
    identity = PackIdentity(
        package_id=package_id,
        distribution=distribution,
        module=module,
        version=version,
        agent=agent,
        entry_agents=[agent],
        author=author,
        license=license_id,
        standard_agents=core_version,
        items=closure.names(),
    )
    items = {kind: closure.items(kind) for kind in KINDS}
    items["agents"] = [packed_agent if a is definition else a for a in closure.agents]
    requirements = [f"standard-agents>={core_version}", *sorted(plan.requirements)]
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sa-pack-", dir=out.parent))
    try:
        package_dir = staging / module
        vendored = plan.copy_into(package_dir)
        writer = DefinitionsWriter(plan)
        pack_fields: dict[str, Any] = {
            "name": package_id,
            "entry_agents": [agent],
            "version": version,
            "author": author,
            "license": license_id,
            "description": summary_line(closure),
        }
        store = store_config(pack.store).model_dump(exclude_defaults=True)
        if store:  # the pack's store config (its embedding model went in with the closure)
            pack_fields["store"] = store
        (package_dir / "definitions.py").write_text(
            writer.render(items, pack_fields), encoding="utf-8"
        )
        (package_dir / "__init__.py").write_text(
            render_init(f"{distribution}: {summary_line(closure)}"), encoding="utf-8"
        )
        (package_dir / IDENTITY_FILE).write_text(identity.to_json(), encoding="utf-8")
        meta = ProjectMeta(
            distribution=distribution,
            version=version,
            module=module,
            description=summary_line(closure),
            entry_points={package_id: f"{module}:pack"},
            dependencies=requirements,
            author=author,
            license_expression=expression,
            license_file=license_id is not None,
            identity=identity,
        )
        (staging / "pyproject.toml").write_text(render_pyproject(meta), encoding="utf-8")
        readme = render_readme(identity, closure, license_id=license_id, core_version=core_version)
        (staging / "README.md").write_text(readme, encoding="utf-8")
        if license_id:
            holder = (split_author(author) or {}).get("name") or author
            text = license_text(license_id, holder=holder)
            (staging / "LICENSE").write_text(text, encoding="utf-8")
        # Check and build before replacing anything: a project that does not load or build
        # leaves an earlier output (and the version it recorded) as it was.
        _verify(staging, package_id)
        result = PackResult(
            identity=identity,
            project=out,
            closure=closure,
            vendored=vendored,
            requirements=requirements,
            license_id=license_id,
            previous_version=previous_version,
        )
        if build:
            built = build_distributions(staging, staging / "dist", isolated=isolated)
            for leftover in staging.glob("*.egg-info"):
                shutil.rmtree(leftover, ignore_errors=True)
            result.check_report = twine_check(built).replace(str(staging), str(out))
            result.files = [out / "dist" / path.name for path in built]
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return result


def _objects(closure: Closure) -> list[object]:
    """Functions and classes the generated code must reach."""
    objects: list[object] = list(closure.callables())
    objects += [t.args for t in closure.tools if isinstance(t.args, type)]
    objects += [e.args for e in closure.effects if isinstance(e.args, type)]
    objects += [p.required_schema for p in closure.prompts if isinstance(p.required_schema, type)]
    objects += [p.output_schema for p in closure.prompts if isinstance(p.output_schema, type)]
    return objects
