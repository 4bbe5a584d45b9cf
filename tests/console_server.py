"""``sa serve`` in a subprocess with the console test kit plugin, for the console tests."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
from serve_process import ServeProcess

from sa_core.store import open_store

KIT = Path(__file__).parent / "console_kit"


async def _create_key(db: str) -> str:
    async with await open_store(db) as store:
        return (await store.create_api_key("console-tests"))[0]


def _key_for(db: str) -> str:
    """A new API key, made on a thread of its own (the caller may run Playwright's loop)."""
    keys: list[str] = []
    maker = threading.Thread(target=lambda: keys.append(asyncio.run(_create_key(db))))
    maker.start()
    maker.join()
    return keys[0]


class ConsoleServer(ServeProcess):
    """A live ``sa serve`` on 127.0.0.1 serving the console kit's pack and the installed packs."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        db = f"sqlite:///{workdir / 'console.db'}"
        self.key = _key_for(db)
        super().__init__(workdir, db, *extra, pythonpath=[KIT])
        try:
            self.wait_ready("/api/packages", timeout=60)
        except BaseException:
            self.stop()
            raise

    def api(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        """An authorised request to the server's ``/api``."""
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.request(method, f"{self.url}/api{path}", headers=headers, timeout=60, **kwargs)  # type: ignore[arg-type]
