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

from sa_core.replay.document import FORMAT, export_thread
from sa_core.replay.driver import replay_thread
from sa_core.replay.importer import import_thread
from sa_core.replay.report import Divergence, ReplayReport

__all__ = [
    "FORMAT",
    "Divergence",
    "ReplayReport",
    "export_thread",
    "import_thread",
    "replay_thread",
]
