"""Crash test: SIGKILL ``sa serve`` at random points under load, restart it, count the damage.

Usage::

    python benchmarks/crash.py --kills 100 [--seed N] [--clients 4] [--workdir DIR]
    python benchmarks/crash.py --kills 30 --workers 3   # 3 sa serve workers on one PostgreSQL

Drives the crash pack in ``tests/crashpack`` (a parent agent, a blocking and a non-blocking
subagent, queued notes, effects, ledger-recording tools, a deterministic model plugin) over HTTP
with concurrent clients against a real ``sa serve`` subprocess on 127.0.0.1, kills it with
SIGKILL at seeded random moments (every third kill right after a 202), restarts it on the same
database, lets it settle and prints the counts that must be zero: acknowledged-but-unanswered
messages, completed tools run again, duplicate child sessions, lost or doubled queue entries,
lost or doubled effects. Exits 1 when any of them is not zero or when the last server never
settled (it stopped making progress while it still owed work). ``tests/test_crash.py`` runs a
short version. ``--workers N`` runs N workers on one PostgreSQL database and kills the one
running turns; ``tests/test_crash.py`` runs a short version of that too.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from crashpack.harness import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
