"""A packed distribution's identity: names, version and metadata, kept across pack and unpack.

The identity travels in two places: ``_pack.json`` inside the packed Python package (so an
installed pack still knows it) and the ``[tool.standard-agents]`` table of the generated
``pyproject.toml``. The agent definition carries ``package_name``, ``version``, ``author`` and
``license`` too, so editing an unpacked project and packing it again keeps all of it.

Names:

* distribution: the agent's ``package_name``, else ``sa-pack-<agent>``;
* module: the distribution name in lower case with ``-`` and ``.`` turned into ``_``;
* pack id (entry-point name, ``Pack.name``, URL segment): the agent's name.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sa_core.packaging.errors import PackagingError

__all__ = [
    "IDENTITY_FILE",
    "PackIdentity",
    "bump_version",
    "default_distribution",
    "module_for",
    "read_identity",
    "split_author",
]

IDENTITY_FILE = "_pack.json"
"""The identity file written into every packed Python package."""

_DIST_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_AUTHOR = re.compile(r"^\s*(?P<name>[^<]*?)\s*<(?P<email>[^>]+)>\s*$")


@dataclass
class PackIdentity:
    """Who a packed distribution is.

    Attributes:
        package_id: the pack's name: its ``sa.packs`` entry-point name and URL segment.
        distribution: the distribution name on the package index.
        module: the top-level Python package of the distribution.
        version: the distribution version.
        agent: the entry agent the distribution was packed from.
        entry_agents: agents other packs may reach (``[agent]``).
        author: ``Name <email>`` or a name, if known.
        license: the SPDX id, if any.
        packed_at: when it was packed, in milliseconds since the epoch.
        standard_agents: the standard-agents version that packed it.
        items: the names that went in, by kind (``agents``, ``prompts`` ...).

    """

    package_id: str
    distribution: str
    module: str
    version: str
    agent: str
    entry_agents: list[str] = field(default_factory=list)
    author: str | None = None
    license: str | None = None
    packed_at: int = field(default_factory=lambda: int(time.time() * 1000))
    standard_agents: str | None = None
    items: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise for ``_pack.json``."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> PackIdentity:
        """Read ``_pack.json`` text; unknown keys are ignored.

        Raises:
            PackagingError: the text is not an identity.

        """
        try:
            data = json.loads(text)
            known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            return cls(**known)
        except (ValueError, TypeError, AttributeError) as exc:
            raise PackagingError(f"{IDENTITY_FILE} is not a pack identity: {exc}") from None


def read_identity(package_dir: Path) -> PackIdentity | None:
    """Return the identity stored in a packed package directory, or ``None`` when it has none."""
    path = package_dir / IDENTITY_FILE
    if not path.is_file():
        return None
    return PackIdentity.from_json(path.read_text(encoding="utf-8"))


def check_distribution_name(name: str, *, fix: str = "") -> str:
    """Return ``name`` when it is a valid distribution name.

    Args:
        name: the name to check.
        fix: where the name came from, added to the message (``"set the agent's package_name"``).

    Raises:
        PackagingError: it is not.

    """
    if not _DIST_NAME.match(name):
        raise PackagingError(
            f"'{name}' is not a valid distribution name: use letters, digits, '-', '_' and '.', "
            f"starting and ending with a letter or digit" + (f" ({fix})." if fix else ".")
        )
    return name


def default_distribution(agent_name: str) -> str:
    """``sa-pack-<agent>``, with ``_`` written as ``-``."""
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", agent_name).strip("-.").lower()
    return check_distribution_name(f"sa-pack-{slug}")


def module_for(distribution: str) -> str:
    """Return the import name for a distribution: lower case, ``-`` and ``.`` become ``_``."""
    module = re.sub(r"[-_.]+", "_", distribution).lower()
    if module[0].isdigit():
        module = f"_{module}"
    return module


def bump_version(version: str) -> str:
    """Return the next patch release: ``1.2.3`` -> ``1.2.4``, ``1.0rc1`` -> ``1.0.1``.

    Raises:
        PackagingError: ``version`` is not a PEP 440 version.

    """
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        raise PackagingError(
            f"version '{version}' is not a valid PEP 440 version; pass --version."
        ) from None
    major, minor, micro = (list(parsed.release) + [0, 0])[:3]
    epoch = f"{parsed.epoch}!" if parsed.epoch else ""
    return f"{epoch}{major}.{minor}.{micro + 1}"


def newer(candidate: str, than: str) -> bool:
    """Whether ``candidate`` is a later version than ``than`` (invalid versions are never newer)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(candidate) > Version(than)
    except InvalidVersion:
        return False


def split_author(author: str | None) -> dict[str, Any] | None:
    """``Name <email>`` as a pyproject author table; ``None`` for no author."""
    if not author or not author.strip():
        return None
    match = _AUTHOR.match(author)
    if match:
        table: dict[str, Any] = {"email": match["email"].strip()}
        if match["name"]:
            table = {"name": match["name"], **table}
        return table
    if "@" in author and " " not in author.strip():
        return {"email": author.strip()}
    return {"name": author.strip()}
