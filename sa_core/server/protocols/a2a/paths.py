"""Where the A2A endpoints live: the mount prefix every A2A module builds its paths on.

A module of its own so the package (which imports the endpoints lazily) and the endpoints
(which build paths on it) both read it without importing each other.
"""

from __future__ import annotations

PREFIX = "/a2a"
"""Where the A2A endpoints are mounted."""
