"""The console tests' browser: headless Chromium through Playwright, a checked page, screenshots.

Screenshots of the main views at 1280 and 390 px go to ``$SA_SCREENSHOTS`` (default
``.sa/screenshots``); they are evidence, so one that times out is noted (a ``.missing.txt``
beside where it would be) and never fails a test.

Waits are event-driven with generous ceilings (60 s for page actions and ``expect``, instead of
Playwright's 30 s and 5 s): a busy machine makes them slower, never wrong.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from console_server import ConsoleServer
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

SHOTS = Path(os.environ.get("SA_SCREENSHOTS", ".sa/screenshots"))
WIDTHS = {"wide": (1280, 900), "narrow": (390, 844)}
CEILING_MS = 60_000
"""The longest any page action or ``expect`` waits; they return as soon as the page is ready."""
SHOT_CEILING_MS = 30_000
"""The longest a screenshot may take before it is noted as missing."""


def chromium_path() -> str:
    for candidate in (
        os.environ.get("SA_CHROMIUM"),
        "/usr/lib/chromium/chromium",
        shutil.which("chromium"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    raise AssertionError(
        "Debian's chromium is not installed: run 'make setup' (apt-get install -y chromium)."
    )


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    expect.set_options(timeout=CEILING_MS)
    try:
        with sync_playwright() as running:
            yield running
    finally:
        expect.set_options(timeout=None)  # back to Playwright's default


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(
        executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
    )
    try:
        yield launched
    finally:
        launched.close()


class Outside:
    """Every request the page tried to send somewhere other than the console's own server."""

    def __init__(self, page: Page, base: str) -> None:
        self.urls: list[str] = []
        own = urlparse(base).netloc

        def check(route: object) -> None:
            url = route.request.url  # type: ignore[attr-defined]
            parsed = urlparse(url)
            if parsed.scheme in ("data", "blob") or parsed.netloc == own:
                route.continue_()  # type: ignore[attr-defined]
            else:
                self.urls.append(url)
                route.abort()  # type: ignore[attr-defined]

        page.route("**/*", check)


@pytest.fixture
def page(browser: Browser, server: ConsoleServer) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(CEILING_MS)
    opened = context.new_page()
    opened.outside = Outside(opened, server.url)  # type: ignore[attr-defined]
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not opened.outside.urls, f"the page reached outside: {opened.outside.urls}"  # type: ignore[attr-defined]


def shoot(page: Page, name: str, full_page: bool = True) -> None:
    """Screenshot the current view at both widths; a screenshot that times out is noted only.

    Screenshots are evidence, not assertions: on a loaded machine a full-page capture can take
    longer than its ceiling, and that must not fail the test that took it. ``full_page=False``
    captures the viewport only (for pages hundreds of thousands of pixels tall).
    """
    SHOTS.mkdir(parents=True, exist_ok=True)
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        path = SHOTS / f"{name}-{label}.png"
        missing = path.with_suffix(".missing.txt")
        try:
            page.screenshot(path=str(path), full_page=full_page, timeout=SHOT_CEILING_MS)
            missing.unlink(missing_ok=True)
        except PlaywrightTimeout as exc:
            note = f"screenshot {path.name} skipped: {str(exc).splitlines()[0]}"
            missing.write_text(note + "\n")
            print(note, file=sys.stderr)
    page.set_viewport_size({"width": 1280, "height": 900})


def sign_in(page: Page, server: ConsoleServer) -> None:
    page.goto(server.url + "/")
    page.get_by_label("API key").fill(server.key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Packs")).to_be_visible()
