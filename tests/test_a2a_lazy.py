"""The A2A SDK loads on the first ``/a2a`` request, not when the app is built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BUILD_APP = """
import sys
from sa_core import Runtime
from sa_core.server import create_app
app = create_app(Runtime(database_url=sys.argv[1], load_entrypoints=False))
print(any(route.path == "/a2a" for route in app.routes), "a2a" in sys.modules)
"""


def test_the_app_mounts_a2a_without_importing_the_sdk(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'sa.db'}"
    done = subprocess.run(
        [sys.executable, "-c", BUILD_APP, database], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["True", "False"], done.stderr
