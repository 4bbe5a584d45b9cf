"""The offline provider under load: memory kept per request, and what ``sa run`` imports.

Run: ``python benchmarks/offline.py``. Sends many requests with long message lists to the
offline provider of ``--test-provider`` and to an unbounded ``TestProvider``, and prints the
memory each still holds (tracemalloc) and the time per answer; then the modules a piped
``sa run`` start-up pulls in from the terminal libraries (none expected) and the time to import
``sa_core.cli.chat``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import tracemalloc

from sa_core.offline import RECORDED_REQUESTS, OfflineProvider
from sa_core.providers import ProviderMessage, ProviderRequest
from sa_core.testing import TestProvider

REQUESTS = 2000
HISTORY = 50  # messages per request, like a long chat


def request(number: int) -> ProviderRequest:
    messages = [
        ProviderMessage("user", f"message {number}-{i} " + "x" * 200) for i in range(HISTORY)
    ]
    return ProviderRequest(model="m", messages=messages)


async def held(provider: TestProvider) -> tuple[float, float]:
    """MiB still allocated after REQUESTS answers, and microseconds per answer."""
    tracemalloc.start()
    start = time.perf_counter()
    for number in range(REQUESTS):
        await provider.generate(request(number))
    elapsed = time.perf_counter() - start
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / 2**20, elapsed / REQUESTS * 1e6


def chat_import() -> tuple[float, list[str]]:
    """Seconds to import sa_core.cli.chat in a fresh interpreter, and terminal modules loaded."""
    code = (
        "import sys, time; t = time.perf_counter(); import sa_core.cli.chat; "
        "print(time.perf_counter() - t); "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('rich', 'prompt_toolkit')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, modules = (out.stdout.splitlines() + [""])[:2]
    return float(seconds), modules.split()


def main() -> None:
    """Print the numbers."""
    bounded, bounded_us = asyncio.run(held(OfflineProvider()))
    unbounded, unbounded_us = asyncio.run(held(TestProvider()))
    print(f"{REQUESTS} requests of {HISTORY} messages each")
    print(
        f"  offline provider (keeps {RECORDED_REQUESTS}): {bounded:7.2f} MiB held, "
        f"{bounded_us:6.1f} us/answer"
    )
    print(
        f"  unbounded TestProvider:        {unbounded:7.2f} MiB held, {unbounded_us:6.1f} us/answer"
    )
    seconds, modules = chat_import()
    print(
        f"import sa_core.cli.chat: {seconds * 1000:.0f} ms; "
        f"terminal modules loaded: {modules or 'none'}"
    )


if __name__ == "__main__":
    main()
