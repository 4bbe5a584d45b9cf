"""What start-up loads, checked on the modules a fresh interpreter imported (never on timings).

In the spirit of ``test_architecture.py``: each check runs a fresh interpreter, lists the
modules it imported from ``sys.modules``, and fails naming every module that should not be
there. ``benchmarks/startup.py`` measures the time; these keep what loads from creeping back.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sa_core.quietimport import collector_paused

ROOT = Path(__file__).resolve().parents[1]

REPORT = """
import json, sys
print(json.dumps(sorted(sys.modules)))
"""

PUBLIC_API = "from sa_core import Pack, Runtime, define_agent, define_prompt, define_tool\n"

FIRST_ANSWER = """
import asyncio, sys
from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
from sa_core.testing import TestProvider, TestScript

pack = Pack(
    name="hello",
    models=[define_model(name="fast", provider="test", model="fake")],
    prompts=[define_prompt(name="greet", model="fast", prompt="Be brief.", include_chat=True)],
    agents=[define_agent(name="greeter", side_a={"prompt": "greet"})],
)


async def first_answer():
    provider = TestProvider(TestScript().add_text_response("Hello!"))
    async with Runtime(
        packs=[pack],
        providers={"test": provider},
        database_url=f"sqlite:///{sys.argv[1]}",
        load_entrypoints=False,
    ) as runtime:
        thread = await runtime.create_thread("greeter")
        await thread.send_message("Hi")
        assert (await thread.get_messages()).messages[-1].content == "Hello!"


asyncio.run(first_answer())
"""

SA_HELP = """
import contextlib, io
from sa_core.cli import main

with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(["--help"])
"""

NEVER_ON_IMPORT = (
    "alembic",
    "litestar",
    "mcp",
    "a2a",
    "ag_ui",
    "opentelemetry",
    "rich",
    "prompt_toolkit",
    "sqlalchemy",
    "httpx",
    "sa_core.server",
    "sa_core.store.store",
    "sa_core.store.tables",
)
"""Loaded by none of the public API's names: the server, the database layer (the store opens
at ``Runtime.start``), the protocol SDKs, telemetry and the CLI's terminal libraries."""

NEVER_ON_FIRST_SQLITE_ANSWER = (
    "alembic",
    "litestar",
    "mcp",
    "a2a",
    "ag_ui",
    "opentelemetry",
    "rich",
    "prompt_toolkit",
    "sqlmodel",
    "sqlalchemy.orm",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.dialects.postgresql",
    "asyncpg",
    "sa_core.server",
)
"""What only PostgreSQL, an old schema (Alembic), the server or telemetry needs."""

NEVER_ON_SA_HELP = (
    "alembic",
    "litestar",
    "rich",
    "prompt_toolkit",
    "asyncio",
    "sqlalchemy",
    "pydantic",
    "importlib.metadata",
    "sa_core.runtime",
    "sa_core.server",
)
"""``sa --help`` lists the commands: it needs argparse and the command modules."""


def modules_loaded_by(code: str, *args: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code`` (with ``args``)."""
    done = subprocess.run(
        [sys.executable, "-c", code + REPORT, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def offenders(loaded: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The forbidden packages (or any of their submodules) that were loaded."""
    return sorted(
        name
        for name in forbidden
        if any(module == name or module.startswith(name + ".") for module in loaded)
    )


def test_importing_the_public_api_loads_no_server_database_or_optional_sdk() -> None:
    loaded = modules_loaded_by(PUBLIC_API)
    assert offenders(loaded, NEVER_ON_IMPORT) == []


def test_a_first_answer_on_a_new_sqlite_database_loads_nothing_only_postgresql_needs(
    tmp_path: Path,
) -> None:
    loaded = modules_loaded_by(FIRST_ANSWER, str(tmp_path / "new.db"))
    assert "sa_core.store.store" in loaded  # the check ran a real runtime
    assert offenders(loaded, NEVER_ON_FIRST_SQLITE_ANSWER) == []


def test_sa_help_loads_the_commands_and_nothing_they_run() -> None:
    loaded = modules_loaded_by(SA_HELP)
    assert "sa_core.cli.serve" in loaded
    assert offenders(loaded, NEVER_ON_SA_HELP) == []


def test_the_built_in_providers_load_httpx_on_their_first_request_only() -> None:
    """httpx loads its command line (click, rich, pygments) on import: ~80 ms of every start."""
    providers = "import sa_providers.anthropic, sa_providers.google, sa_providers.openai\n"
    loaded = modules_loaded_by(providers + "import sa_providers.openai_compatible\n")
    assert offenders(loaded, ("httpx", "rich", "pygments", "click")) == []


def test_the_offender_check_names_packages_and_their_submodules_only() -> None:
    loaded = {"sqlalchemy.orm.session", "richer", "mcp", "json"}
    assert offenders(loaded, ("sqlalchemy.orm", "rich", "mcp", "a2a")) == [
        "mcp",
        "sqlalchemy.orm",
    ]


EXIT = """
import asyncio, atexit, sys
from sa_core import Runtime

atexit.register(print, "atexit handler ran")


class Cycle:
    def __init__(self):
        self.me = self

    def __del__(self):
        print("cycle finalized")


async def main():
    async with Runtime(database_url=f"sqlite:///{sys.argv[1]}", load_entrypoints=False):
        pass


asyncio.run(main())
kept = Cycle()
"""


@pytest.mark.parametrize("keep", [False, True])
def test_a_process_that_ran_a_runtime_exits_without_the_final_collection_unless_asked(
    tmp_path: Path, keep: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SA_FINAL_COLLECTION"}
    if keep:
        env["SA_FINAL_COLLECTION"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", EXIT, str(tmp_path / "exit.db")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "atexit handler ran" in done.stdout  # every exit handler still runs
    assert ("cycle finalized" in done.stdout) is keep


class _Node:
    def __init__(self) -> None:
        self.me = self


def test_what_a_paused_block_loads_goes_to_the_oldest_generation_and_stays_collectable() -> None:
    import weakref

    with collector_paused():
        kept = _Node()
        dropped = _Node()
        gone = weakref.ref(dropped)
    del dropped
    assert any(obj is kept for obj in gc.get_objects(generation=2))
    assert gone() is not None  # a cycle: only the collector frees it...
    gc.collect()
    assert gone() is None  # ...and a full collection still does


def test_a_paused_block_leaves_an_applications_frozen_objects_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            _Node()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("switched_off", [False, True])
def test_a_paused_collector_runs_again_after_the_block_unless_it_was_off(
    switched_off: bool,
) -> None:
    was_enabled = gc.isenabled()
    try:
        if switched_off:
            gc.disable()
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the inner block did not resume it
        assert gc.isenabled() is not switched_off
    finally:
        if was_enabled:
            gc.enable()
