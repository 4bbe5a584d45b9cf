"""The pytest plugin of the test kit (entry point ``sa_testing``): fixtures and ``sa_eval``.

pytest loads it by itself where ``standard-agents`` is installed (disable it with
``-p no:sa_testing``). The providers and scripts live in :mod:`sa_core.testing`, which does not
import pytest.

``@pytest.mark.sa_eval("evals/suite.yaml")`` parametrises a test with one
:class:`~sa_core.evals.casetest.EvalCase` per case of the suite, as its ``sa_eval_case``
argument (the path is relative to the test file, else to pytest's root directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sa_core.testing import RuntimeFactory

EVAL_MARKER = "sa_eval"


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``sa_eval`` marker."""
    config.addinivalue_line(
        "markers",
        f"{EVAL_MARKER}(path): one test per case of an eval suite, as the sa_eval_case argument",
    )


def _suite_path(metafunc: pytest.Metafunc, given: str) -> Path:
    path = Path(given)
    if path.is_absolute():
        return path
    beside = Path(str(metafunc.definition.path)).parent / path
    return beside if beside.exists() else Path(str(metafunc.config.rootpath)) / path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``sa_eval``-marked tests by the cases of their suite."""
    marker = metafunc.definition.get_closest_marker(EVAL_MARKER)
    if marker is None or "sa_eval_case" not in metafunc.fixturenames:
        return
    if not marker.args:
        raise pytest.UsageError(f"@pytest.mark.{EVAL_MARKER} needs the suite's path")
    from sa_core.evals.casetest import EvalCase
    from sa_core.evals.suite import Suite

    suite = Suite.load(_suite_path(metafunc, str(marker.args[0])))
    cases = [EvalCase(suite, case) for case in suite.cases]
    metafunc.parametrize("sa_eval_case", cases, ids=[c.id for c in cases])


@pytest.fixture
def sa_eval_case() -> Any:
    """Set by ``@pytest.mark.sa_eval(path)``; requested without the marker, an error."""
    raise pytest.UsageError(
        "sa_eval_case comes from @pytest.mark.sa_eval('path/to/suite.yaml') on the test"
    )


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


__all__ = ["sa_database_url", "sa_eval_case", "sa_runtime_factory"]
