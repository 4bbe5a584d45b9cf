"""Per-thread knowledge kept in process memory has a bound: idle threads cost nothing more."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from sa_core.cachepolicy import CACHED_MESSAGES_VARIABLE
from sa_core.engine.tools import approvals


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


def _bounds_with(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != CACHED_MESSAGES_VARIABLE}
    if value is not None:
        env[CACHED_MESSAGES_VARIABLE] = value
    code = (
        "from sa_core.engine.model import context, pastcontext; from sa_core.store import caches; "
        "print(caches.HISTORY_MESSAGES, caches.ROW_MESSAGES, context.CONVERTED_MESSAGES, "
        "pastcontext.KEPT_MESSAGES)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_one_variable_sizes_every_cache_of_messages() -> None:
    assert _bounds_with(None).stdout.split() == ["50000"] * 4
    assert _bounds_with("200_000").stdout.split() == ["200000"] * 4


@pytest.mark.parametrize("value", ["lots", "0", "-5", "1.5"])
def test_a_cache_size_that_is_not_a_positive_number_is_refused_by_name(value: str) -> None:
    done = _bounds_with(value)
    assert done.returncode != 0
    assert f"{CACHED_MESSAGES_VARIABLE} must be a positive whole number" in done.stderr
    assert repr(value) in done.stderr
