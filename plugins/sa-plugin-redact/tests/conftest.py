"""Make the plugin importable without installing it (``pytest plugins`` from the repo root)."""

from __future__ import annotations

import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
