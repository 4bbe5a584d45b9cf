"""What ``sa packs`` shows about each installed pack.

Builds on :func:`sa_core.packloader.installed_packs`: a broken pack becomes an error naming its
distribution and never hides the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from email.parser import Parser
from importlib import metadata

from sa_core.errors import PackLoadError
from sa_core.packloader import EntryPointInfo, installed_packs
from sa_core.spec import Pack

__all__ = ["InstalledPackInfo", "installed_pack_infos"]


@dataclass
class InstalledPackInfo:
    """One installed pack.

    Attributes:
        package_id: the pack's name (its entry-point name).
        distribution: the distribution providing it.
        version: the distribution's version (else the pack's).
        author: from the distribution's metadata, else the pack or its entry agent.
        license: the license expression, likewise.
        entry_agents: the agents other packs may reach.
        origin: where it came from: an editable project, a file or URL, or the install directory.
        packed_by_sa: whether ``sa pack`` built it (it carries ``_pack.json``).

    """

    package_id: str
    distribution: str | None
    version: str | None
    author: str | None
    license: str | None
    entry_agents: list[str] = field(default_factory=list)
    origin: str = "unknown"
    packed_by_sa: bool = False


def _origin(dist: metadata.Distribution | None, info: EntryPointInfo) -> str:
    if dist is None:
        return info.location or "unknown"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    url = str(direct.get("url", ""))
    if direct.get("dir_info", {}).get("editable"):
        return f"editable project {url.removeprefix('file://')}"
    if url:
        return f"direct from {url}"
    installer = (dist.read_text("INSTALLER") or "").strip()
    where = f"installed in {dist.locate_file('')}"
    return f"{where} by {installer}" if installer else where


def _metadata(dist: metadata.Distribution | None) -> dict[str, str]:
    """Return the single-valued core metadata fields of a distribution."""
    if dist is None:
        return {}
    raw = Parser().parsestr(dist.read_text("METADATA") or "", headersonly=True)
    return {key: str(value) for key, value in raw.items()}


def _first(*values: str | None) -> str | None:
    return next((v.strip() for v in values if v and v.strip()), None)


def _describe(info: EntryPointInfo, pack: Pack) -> InstalledPackInfo:
    dist: metadata.Distribution | None = None
    if info.distribution:
        try:
            dist = metadata.distribution(info.distribution)
        except metadata.PackageNotFoundError:
            dist = None
    meta = _metadata(dist)
    entry = [a for a in pack.agents if a.name in pack.entry_agent_names()]
    agent_author = entry[0].author if entry else None
    agent_license = entry[0].license if entry else None
    module = info.value.partition(":")[0]
    packed = bool(
        dist is not None
        and any(str(f) == f"{module.replace('.', '/')}/_pack.json" for f in dist.files or [])
    )
    license_text = meta.get("License")
    if license_text and ("\n" in license_text or len(license_text) > 40):
        license_text = None
    return InstalledPackInfo(
        package_id=pack.name,
        distribution=info.distribution,
        version=info.version or pack.version,
        author=_first(
            meta.get("Author-email"),
            meta.get("Author"),
            pack.author,
            agent_author,
        ),
        license=_first(
            meta.get("License-Expression"),
            license_text,
            pack.license,
            agent_license,
        ),
        entry_agents=pack.entry_agent_names(),
        origin=_origin(dist, info),
        packed_by_sa=packed,
    )


def installed_pack_infos(
    *, validate: bool = True
) -> tuple[list[InstalledPackInfo], list[PackLoadError]]:
    """Describe every installed pack; broken ones come back as errors.

    Args:
        validate: validate each pack's graph too (plugin tools count as known).

    """
    tools: list[str] = []
    if validate:
        from sa_core.packaging.verify import environment

        tools, _ = environment()
    loaded, errors = installed_packs(validate=validate, known_tools=tools)
    return [_describe(info, pack) for info, pack in loaded], errors
