"""A real ``sa serve --test-provider`` for the OpenAI-compatible API tests.

The server hosts the installed example packs (``make setup`` installs them); the reminders
pack needs no variables, so its agent answers offline. ``Served.start`` waits for the port and
keeps the first start's API key, so a restart on the same database reuses it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from serve_process import ServeProcess, offline_env

MODEL = "reminders/reminder_assistant"
READY_SECONDS = 60.0


class Served(ServeProcess):
    """``sa serve --test-provider --no-ui`` on its own loopback port.

    ``test_provider=False`` leaves the packs' own providers in place (a test plugin's, on
    ``pythonpath``).
    """

    def __init__(
        self,
        cwd: Path,
        db: str,
        *extra: str,
        key: str = "",
        test_provider: bool = True,
        pythonpath: Sequence[Path] = (),
    ) -> None:
        flags = ("--test-provider",) if test_provider else ()
        super().__init__(
            cwd, db, *flags, "--no-ui", *extra, env=offline_env(), pythonpath=pythonpath
        )
        self.key = key

    def start(self) -> Served:
        """Wait until the server answers (and printed its key, on a first start)."""
        self.wait_ready(timeout=READY_SECONDS)
        deadline = time.monotonic() + READY_SECONDS
        while not self.key:
            assert time.monotonic() < deadline, f"no API key printed:\n{self.output()}"
            self.key = self.printed_key() or ""
            time.sleep(0.05)
        return self

    @property
    def base_url(self) -> str:
        """The OpenAI client's ``base_url``."""
        return f"{self.url}/v1"
