"""Pluggy markers for standard-agents plugins.

Plugins import only this package::

    from sa_hooks import hookimpl

    @hookimpl
    def sa_register_providers(register):
        register(MyProvider())

The hook specifications live in :mod:`sa_hooks.specs`. This package depends on pluggy only.
"""

from __future__ import annotations

import pluggy

PROJECT = "sa"
"""The pluggy project name, which is also the entry-point group plugins are discovered from."""

PACKS_GROUP = "sa.packs"
"""The entry-point group whose entries name ``Pack`` objects."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PACKS_GROUP", "PROJECT", "hookimpl", "hookspec"]
