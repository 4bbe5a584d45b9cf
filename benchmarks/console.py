"""The console's weight and the thumbnail cost.

Run: ``python benchmarks/console.py``. Prints the bytes the console page loads (its own files, then
the vendored docs bundles), and the time to make a thumbnail of a 4000 x 3000 photo-like JPEG the
first time and from the cache (medians of several runs; the machine may be shared and busy).
"""

from __future__ import annotations

import asyncio
import io
import random
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image

from sa_core import Runtime, define_agent, define_model, define_prompt
from sa_core.server.console import STATIC_DIR
from sa_core.spec import Pack

ROUNDS = 5


def asset_sizes() -> tuple[int, int]:
    own = sum(
        p.stat().st_size for p in STATIC_DIR.rglob("*") if p.is_file() and "vendor" not in p.parts
    )
    vendor = sum(p.stat().st_size for p in (STATIC_DIR / "vendor").rglob("*") if p.is_file())
    return own, vendor


def photo(width: int = 4000, height: int = 3000) -> bytes:
    rng = random.Random(7)
    small = Image.new("RGB", (80, 60))
    small.putdata(
        [(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(80 * 60)]
    )
    buffer = io.BytesIO()
    small.resize((width, height), Image.Resampling.BICUBIC).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


async def thumbnails(data: bytes) -> tuple[list[float], list[float]]:
    pack = Pack(
        name="bench",
        models=[define_model(name="m", provider="test", model="m")],
        prompts=[define_prompt(name="p", model="m", prompt="Hi.")],
        agents=[define_agent(name="a", side_a={"prompt": "p"})],
    )
    first: list[float] = []
    cached: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(
            packs=[pack],
            database_url=f"sqlite:///{Path(tmp) / 'b.db'}",
            load_entrypoints=False,
            offline=True,
        )
        await runtime.start()
        try:
            thread = await runtime.create_thread("a")
            for index in range(ROUNDS):
                path = f"/photos/{index}.jpg"
                await thread.write_file(path, data, "image/jpeg")
                start = time.perf_counter()
                await thread.get_file_thumbnail(path)
                first.append(time.perf_counter() - start)
                start = time.perf_counter()
                await thread.get_file_thumbnail(path)
                cached.append(time.perf_counter() - start)
        finally:
            await runtime.close()
    return first, cached


def main() -> None:
    own, vendor = asset_sizes()
    print(f"console assets (html, css, js, icon): {own / 1024:.1f} KiB, no third-party code")
    print(f"vendored docs assets (swagger-ui, redoc): {vendor / 1024 / 1024:.2f} MiB")
    data = photo()
    first, cached = asyncio.run(thumbnails(data))
    print(
        f"thumbnail of a 4000x3000 JPEG ({len(data) / 1024:.0f} KiB): "
        f"first {statistics.median(first) * 1000:.1f} ms, "
        f"cached {statistics.median(cached) * 1000:.2f} ms "
        f"(median of {ROUNDS})"
    )


if __name__ == "__main__":
    main()
