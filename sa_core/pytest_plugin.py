"""The pytest plugin of the test kit (entry point ``sa_testing``): its two fixtures.

pytest loads it by itself where ``standard-agents`` is installed (disable it with
``-p no:sa_testing``). The providers and scripts live in :mod:`sa_core.testing`, which does not
import pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from sa_core.testing import RuntimeFactory


@pytest.fixture
def sa_database_url(tmp_path: Path) -> str:
    """Return a SQLite URL in the test's temporary directory: ``sqlite:///<tmp_path>/sa.db``."""
    return f"sqlite:///{tmp_path / 'sa.db'}"


@pytest.fixture
def sa_runtime_factory(sa_database_url: str) -> RuntimeFactory:
    """Open runtimes on the test's database.

    Usage::

        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            ...

    Entry points are not loaded; every runtime opened by the same factory shares
    ``sa_database_url``.
    """
    from sa_core.testing import make_runtime_factory  # imported once a test asks for it

    return make_runtime_factory(sa_database_url)


__all__ = ["sa_database_url", "sa_runtime_factory"]
