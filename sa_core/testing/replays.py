"""Replaying a recorded thread inside a test: a production incident becomes a regression test.

Export the thread where it went wrong (``sa thread export ID -o incident.json``, or
``GET .../threads/{id}/export``), keep the file with your tests, and replay it against the code
under test::

    async def test_the_refund_incident_stays_fixed():
        report = await replay_export("tests/incidents/refund.json", packs=[support_pack])
        assert_identical(report)

The replay runs in a runtime of its own on a throwaway SQLite database, with providers that
fail if they are called (every model answer comes from the recording), so the test needs no
key and no network. When the code changed what the agents do, the report names the first
divergence: its kind, the thread (``root/researcher#1``), the call and a readable diff.
"""

from __future__ import annotations

import importlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sa_core.testing.providers import FunctionProvider

if TYPE_CHECKING:
    from sa_core.providers import ProviderRequest
    from sa_core.replay import ReplayReport
    from sa_core.spec import Pack


def _no_model(request: ProviderRequest) -> str:
    raise AssertionError(
        f"a replay called model {request.model!r}: every answer must come from the recording"
    )


async def replay_export(
    source: str | Path | Mapping[str, Any],
    *,
    packs: Sequence[Pack],
    tools: Literal["recorded", "execute"] = "recorded",
    stop_at_first: bool = True,
    database_url: str | None = None,
    **options: Any,
) -> ReplayReport:
    """Replay an exported thread (a file or the document) against ``packs``; the report.

    Args:
        source: An ``sa-thread/1`` file, or the document itself.
        packs: The packs under test (the document's agents must be among them).
        tools: ``recorded`` (the recorded results) or ``execute`` (run the tools again).
        stop_at_first: Stop at the first divergence.
        database_url: Where the replay runs (default: a new SQLite file, deleted after).
        options: More ``Runtime`` keyword arguments (``env=...``, ``plugins=...``).
    """
    document = source
    if isinstance(source, (str, Path)):
        document = json.loads(Path(source).read_text(encoding="utf-8"))
    runtime_class = importlib.import_module("sa_core.runtime").Runtime
    names = {model.provider for pack in packs for model in pack.models}
    providers = {name: FunctionProvider(_no_model, name=name) for name in names}
    settings: dict[str, Any] = {"load_entrypoints": False, "providers": providers, **options}
    with tempfile.TemporaryDirectory(prefix="sa-replay-") as directory:
        url = database_url or f"sqlite:///{Path(directory) / 'replay.db'}"
        async with runtime_class(packs=list(packs), database_url=url, **settings) as runtime:
            report: ReplayReport = await runtime.replay_thread(
                document, tools=tools, stop_at_first=stop_at_first
            )
    return report


def assert_identical(report: ReplayReport) -> None:
    """Fail with the report (its first divergence and diff) unless the replay was identical."""
    if not report.identical:
        raise AssertionError(str(report))


__all__ = ["assert_identical", "replay_export"]
