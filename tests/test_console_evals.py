"""The console's Evals view in a real headless Chromium: runs, the matrix, a trial, a comparison.

Two runs of a suite over the console kit's pack are written to the live server's database (as
``sa eval run`` on that database would): the second run's suite expects a word the echo case
never says, so that case regresses. The view lists both runs, shows a run's cases x trials
matrix, opens a cell as the trial's messages and tool calls beside the expectations that decided
it (and from there the thread itself), and compares the two runs side by side.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from console_server import KIT, ConsoleServer
from playwright.sync_api import Browser, Page, expect
from console_browser_kit import CEILING_MS, browser, playwright, shoot, sign_in  # noqa: F401

SUITE: dict[str, Any] = {
    "suite": "console-evals",
    "target": "console_demo/lead",
    "trials": 2,
    "cases": [
        {
            "id": "uses-tools",
            "input": "please use your tools",
            "expect": {
                "tools": {"match": "in_order", "calls": ["note", "scout"]},
                "tree": [{"child": "scout", "count": 1}],
                "files": {"/notes/note.md": {"contains": "Remember"}},
                "status": "completed",
            },
        },
        {"id": "echo", "input": "hello there", "expect": {"final": {"contains": "hello there"}}},
    ],
}


async def _run_suites(db: str) -> tuple[str, str]:
    if str(KIT) not in sys.path:
        sys.path.insert(0, str(KIT))
    from sa_console_kit import PROVIDER, answer, pack

    from sa_core import Runtime
    from sa_core.evals import Suite, run_suite
    from sa_core.testing import FunctionProvider

    provider = FunctionProvider(answer, name=PROVIDER)
    async with Runtime(
        packs=[pack], providers={PROVIDER: provider}, database_url=db, load_entrypoints=False
    ) as rt:
        first = await run_suite(Suite.parse(SUITE), runtime=rt)
        changed = {
            **SUITE,
            "cases": [
                SUITE["cases"][0],
                {**SUITE["cases"][1], "expect": {"final": {"contains": "goodbye"}}},
            ],
        }
        second = await run_suite(Suite.parse(changed), runtime=rt, baseline=first.run_id)
    assert second.comparison is not None and second.comparison.regressions == ["echo"]
    return first.run_id, second.run_id


@pytest.fixture(scope="module")
def evals_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ConsoleServer, str, str]]:
    workdir = tmp_path_factory.mktemp("console-evals")
    live = ConsoleServer(workdir)
    try:
        runs: list[tuple[str, str]] = []
        db = f"sqlite:///{workdir / 'console.db'}"
        maker = threading.Thread(target=lambda: runs.append(asyncio.run(_run_suites(db))))
        maker.start()
        maker.join()
        assert runs, "the eval runs could not be written"
        yield live, *runs[0]
    finally:
        live.stop()


@pytest.fixture
def page(browser: Browser, evals_server: tuple[ConsoleServer, str, str]) -> Iterator[Page]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(CEILING_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_the_matrix_opens_a_trial_beside_its_expectations_and_then_its_thread(
    page: Page, evals_server: tuple[ConsoleServer, str, str]
) -> None:
    server, first, second = evals_server
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/evals")
    expect(page.get_by_role("heading", name="Evals of console_demo")).to_be_visible()
    expect(page.get_by_role("link", name=first)).to_be_visible()
    expect(page.get_by_role("link", name=second)).to_be_visible()
    page.get_by_role("link", name=first).click()
    matrix = page.get_by_role("table", name=f"Cases and trials of {first}")
    expect(matrix.get_by_role("link", name="uses-tools trial 1: pass, score 1.00")).to_be_visible()
    expect(matrix.get_by_role("link", name="echo trial 0: pass, score 1.00")).to_be_visible()
    shoot(page, "evals-matrix")
    matrix.get_by_role("link", name="uses-tools trial 0: pass, score 1.00").click()
    expect(page.get_by_role("heading", name="uses-tools · trial 0: passed")).to_be_visible()
    expect(page.get_by_role("heading", name="Expectations (all passed)")).to_be_visible()
    expect(page.locator(".expectation code", has_text="tree[0]")).to_be_visible()
    expect(page.get_by_text("1 scout child(ren) as expected")).to_be_visible()
    calls = page.get_by_role("list", name="Tool calls").first
    expect(calls).to_contain_text("note")
    expect(calls).to_contain_text("scout")
    tree = page.get_by_role("list", name="Subagent threads")
    expect(tree).to_contain_text("/scout · blocking")
    expect(tree).to_contain_text("No tool calls.")  # its judge's approve ends the session
    shoot(page, "evals-trial")
    page.get_by_role("link", name="Open the thread →").click()
    run = server.api("GET", f"/packages/console_demo/evals/runs/{first}").json()
    (thread_id,) = [
        t["thread_id"] for t in run["trials"] if (t["case_id"], t["trial"]) == ("uses-tools", 0)
    ]
    expect(page).to_have_url(re.compile(rf"#/p/console_demo/t/{thread_id}/conversation$"))
    expect(page.get_by_text("All done: I saved a")).to_be_visible()


def test_a_failed_cell_shows_the_deciding_expectation_and_two_runs_compare_side_by_side(
    page: Page, evals_server: tuple[ConsoleServer, str, str]
) -> None:
    server, first, second = evals_server
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/evals/{second}")
    failed = page.get_by_role("link", name="echo trial 1: fail, score 0.00")
    expect(failed).to_be_visible()
    failed.click()
    expect(page.get_by_role("heading", name="Deciding expectations (1 failed)")).to_be_visible()
    expect(page.locator(".expectation.bad")).to_contain_text("final answer lacks 'goodbye'")
    page.goto(f"{server.url}/#/p/console_demo/evals")
    page.get_by_label("Baseline").select_option(first)
    page.get_by_label("Run", exact=True).select_option(second)
    page.get_by_role("button", name="Compare").click()
    expect(page.get_by_role("heading", name=f"{second} against {first}")).to_be_visible()
    both = page.get_by_role("table", name="Cases of both runs")
    expect(both.get_by_role("row", name="echo 100% 0% regression")).to_be_visible()
    expect(both.get_by_role("row", name="uses-tools 100% 100% same")).to_be_visible()
    expect(page.get_by_role("table", name=f"Cases and trials of {first}")).to_be_visible()
    expect(page.get_by_role("table", name=f"Cases and trials of {second}")).to_be_visible()
    shoot(page, "evals-compare")
