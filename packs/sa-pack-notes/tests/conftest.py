"""Make the pack importable without installing it (``pytest tests packs plugins`` from the root)."""

from __future__ import annotations

import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
