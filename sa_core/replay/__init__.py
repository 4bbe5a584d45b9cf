"""Time travel across machines: export a thread tree, import it anywhere, replay it.

- :func:`~sa_core.replay.document.export_thread` (``await thread.export()``): the tree as an
  ``sa-thread/1`` JSON document (messages, logs with the recorded model calls, files, values,
  the registry and the children, secret values left out);
- :func:`~sa_core.replay.importer.import_thread` (``await runtime.import_thread(doc)``): the
  document as a new tree on any store;
- :func:`~sa_core.replay.driver.replay_thread` (``await runtime.replay_thread(...)``): the
  recorded inputs run again, every model answer served from the recording, and a
  :class:`~sa_core.replay.report.ReplayReport` saying whether it did the same.

See docs/time-travel.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FORMAT": "sa_core.replay.document",
    "Divergence": "sa_core.replay.report",
    "ReplayReport": "sa_core.replay.report",
    "export_thread": "sa_core.replay.document",
    "import_thread": "sa_core.replay.importer",
    "replay_thread": "sa_core.replay.driver",
}
"""Loaded on first use: importing the package (``ThreadState`` does) loads no database layer."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sa_core.replay' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "FORMAT",
    "Divergence",
    "ReplayReport",
    "export_thread",
    "import_thread",
    "replay_thread",
]
