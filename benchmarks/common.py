"""Shared helpers of the benchmarks: the ``--short`` flag, medians and plain printing.

The machine running a benchmark may be shared and busy, so every figure is the median of
several rounds (each round in a fresh runtime and database) and CPU time is printed next to
wall time where it matters: CPU time counts only this process's own work.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence


def parse_args(description: str) -> argparse.Namespace:
    """Parse the common command line: ``--short`` (a quick, smaller run) and ``--rounds``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--short", action="store_true", help="a quick run with smaller sizes")
    parser.add_argument("--rounds", type=int, default=None, help="rounds to take the median of")
    parser.add_argument(
        "--load-seconds", type=float, default=None, help="length of the load run (server.py)"
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="a throwaway PostgreSQL cluster instead of a SQLite file (long_thread.py)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also count what one delegation is made of (delegation.py)",
    )
    return parser.parse_args()


def summary(values: Sequence[float], unit: str = "ms") -> str:
    """``median X unit (min A, max B, N rounds)``."""
    return (
        f"median {statistics.median(values):.3f} {unit} "
        f"(min {min(values):.3f}, max {max(values):.3f}, {len(values)} rounds)"
    )


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which ``fraction`` of the sorted values fall (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index]
