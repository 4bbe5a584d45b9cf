"""The test kit: scripted providers and pytest fixtures for testing packs without a network.

Script the model's answers, register the provider under the name your model definitions use,
and drive the runtime as a user would::

    script = (
        TestScript()
        .add_tool_call_response([{"name": "lookup", "arguments": {"q": "tea"}}])
        .add_text_response("Green tea it is.")
    )
    provider = TestProvider(script)
    async with Runtime(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("barista")
        await thread.send_message("What should I drink?")
    assert provider.tool_names() == ["lookup"]
    assert provider.is_script_complete()

:class:`TestProvider` answers from a :class:`TestScript` in order (or ``Test response
received.`` forever when it has no script); :class:`FunctionProvider` answers by calling a
function, for replies that depend on the request. Both record every request they receive.
:class:`ManualClock` is a clock a test moves by hand, for schedules (``Runtime(clock=...)``).
:func:`replay_export` replays an exported thread (``sa thread export``) against the packs
under test, and :func:`assert_identical` fails with its first divergence: an incident kept as
a regression test (docs/time-travel.md).

The fixtures ``sa_database_url`` and ``sa_runtime_factory`` come with the pytest plugin
:mod:`sa_core.pytest_plugin` (entry point ``sa_testing``). This module does not import pytest,
so a script or a server using its providers does not load pytest.
"""

from __future__ import annotations

from typing import Any

from sa_core.testing.answers import stream_response
from sa_core.testing.clock import ManualClock
from sa_core.testing.providers import DEFAULT_RECORDED, FunctionProvider, TestProvider
from sa_core.testing.replays import assert_identical, replay_export
from sa_core.testing.runtimes import RuntimeFactory, make_runtime_factory
from sa_core.testing.script import (
    UNSCRIPTED_REPLY,
    FunctionResult,
    InputExpectation,
    ScriptedResponse,
    TestScript,
    default_error_code,
    new_call_id,
)


def __getattr__(name: str) -> Any:
    """The fixtures, for ``from sa_core.testing import sa_runtime_factory`` (imports pytest)."""
    if name in ("sa_database_url", "sa_runtime_factory"):
        from sa_core import pytest_plugin

        return getattr(pytest_plugin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pytest_configure(config: Any) -> None:
    """Bring the fixtures along where pytest loads this module as a plugin.

    Only pytest calls it, and only for ``pytest_plugins = ["sa_core.testing"]`` (the older
    spelling of :mod:`sa_core.pytest_plugin`): registers that plugin unless it already is.
    """
    from sa_core import pytest_plugin

    manager = config.pluginmanager
    if not manager.is_registered(pytest_plugin):
        manager.register(pytest_plugin, "sa_core.pytest_plugin")


__all__ = [
    "DEFAULT_RECORDED",
    "UNSCRIPTED_REPLY",
    "FunctionProvider",
    "FunctionResult",
    "InputExpectation",
    "ManualClock",
    "RuntimeFactory",
    "ScriptedResponse",
    "TestProvider",
    "TestScript",
    "assert_identical",
    "default_error_code",
    "make_runtime_factory",
    "new_call_id",
    "replay_export",
    "stream_response",
]
