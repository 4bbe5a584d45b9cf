"""pass@k and pass^k in closed form, and latency percentiles.

For a case run ``n`` times with ``c`` passing trials:

- ``pass@k = 1 - C(n-c, k) / C(n, k)``: the chance that at least one of ``k`` trials drawn
  without replacement passes (the unbiased estimator of Chen et al., 2021);
- ``pass^k = C(c, k) / C(n, k)``: the chance that all ``k`` drawn trials pass (tau-bench's
  reliability measure).

``n=5, c=3``: pass@1 = 0.6, pass@2 = 0.9, pass^2 = 0.3.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """``1 - C(n-c, k) / C(n, k)`` (``None``-free: ``k > n`` is clamped to ``n``).

    Raises:
        ValueError: ``n < 1``, ``c`` outside ``[0, n]`` or ``k < 1``.
    """
    _check(n, c, k)
    k = min(k, n)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)`` (``k > n`` is clamped to ``n``).

    Raises:
        ValueError: ``n < 1``, ``c`` outside ``[0, n]`` or ``k < 1``.
    """
    _check(n, c, k)
    k = min(k, n)
    return comb(c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if n < 1 or not 0 <= c <= n or k < 1:
        raise ValueError(f"pass@k needs n >= 1, 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
