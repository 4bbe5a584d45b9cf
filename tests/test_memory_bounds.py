"""Per-thread knowledge kept in process memory has a bound: idle threads cost nothing more."""

from __future__ import annotations

from typing import Any

import pytest

from sa_core.engine import approvals


def test_approval_knowledge_keeps_only_the_most_recently_marked_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class FakeRuntime:
        pass

    runtime: Any = FakeRuntime()
    monkeypatch.setattr(approvals, "KNOWN_THREADS", 3)
    for name in ("t1", "t2", "t3"):
        approvals.mark_no_pending(runtime, name)
    approvals.mark_no_pending(runtime, "t1")  # used again: now the most recent
    approvals.mark_no_pending(runtime, "t4")
    approvals.mark_no_pending(runtime, "t5")
    known = approvals._pending_known[runtime]
    assert list(known) == ["t1", "t4", "t5"]  # t2 and t3 are read from the database again
