"""Packaging tooling for packs: closure analysis, ``sa pack``, ``sa unpack``, ``sa new pack``.

The CLI commands are thin wrappers over these functions:

* :func:`compute_closure` finds everything an agent needs within its pack;
* :func:`pack_agent` writes a standalone distribution for one agent and builds it;
* :func:`unpack_distribution` writes an installed pack back into an editable project;
* :func:`scaffold_pack` creates a new pack project;
* :func:`installed_pack_infos` describes the installed packs for ``sa packs``;
* :func:`license_text` gives LICENSE texts by SPDX id.

Names load lazily, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Closure": "sa_core.packaging.closure",
    "InstalledPackInfo": "sa_core.packaging.installed",
    "PackIdentity": "sa_core.packaging.identity",
    "PackResult": "sa_core.packaging.packer",
    "PackagingError": "sa_core.packaging.errors",
    "UnpackResult": "sa_core.packaging.unpacker",
    "compute_closure": "sa_core.packaging.closure",
    "installed_pack_infos": "sa_core.packaging.installed",
    "license_text": "sa_core.packaging.licenses",
    "pack_agent": "sa_core.packaging.packer",
    "scaffold_pack": "sa_core.packaging.scaffold",
    "unpack_distribution": "sa_core.packaging.unpacker",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from sa_core.packaging.closure import Closure as Closure
    from sa_core.packaging.closure import compute_closure as compute_closure
    from sa_core.packaging.errors import PackagingError as PackagingError
    from sa_core.packaging.identity import PackIdentity as PackIdentity
    from sa_core.packaging.installed import InstalledPackInfo as InstalledPackInfo
    from sa_core.packaging.installed import installed_pack_infos as installed_pack_infos
    from sa_core.packaging.licenses import license_text as license_text
    from sa_core.packaging.packer import PackResult as PackResult
    from sa_core.packaging.packer import pack_agent as pack_agent
    from sa_core.packaging.scaffold import scaffold_pack as scaffold_pack
    from sa_core.packaging.unpacker import UnpackResult as UnpackResult
    from sa_core.packaging.unpacker import unpack_distribution as unpack_distribution


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sa_core.packaging' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
