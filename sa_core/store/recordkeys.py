"""The keys of recorded model calls, without the store's tables (the engine imports them).

See :mod:`sa_core.store.modelcalls` for where recorded calls are kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

PART_DIGITS = 16
"""Hex digits kept of each part's digest (a request's own hash keeps all 64)."""
MAX_STAGED = 4096
"""Staged calls kept at most: a call whose log is never stored (its step was cancelled between
the answer and the commit) is dropped, oldest first, instead of being held forever."""


def parts_key(system: str, tools: Mapping[str, str], settings: str) -> str:
    """The key of a request's unchanging parts: a digest of their digests."""
    listed = ",".join([f"{name}={digest}" for name, digest in sorted(tools.items())])
    text = f"{system}|{listed}|{settings}"
    return hashlib.sha256(text.encode()).hexdigest()[:PART_DIGITS]


def request_hash(model: str, messages: str, count: int, parts: str) -> str:
    """A request's canonical hash, made of its recorded digests (SHA-256, hex)."""
    return hashlib.sha256(f"{model}|{messages}|{count}|{parts}".encode()).hexdigest()
