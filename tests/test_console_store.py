"""The console's store panel in headless Chromium: browse namespaces, search, edit, delete.

Its own live ``sa serve`` of the console test kit, whose pack declares an embedding model (the
kit's offline provider embeds deterministically), so the search ranks by meaning.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from console_browser_kit import browser, page, playwright, shoot, sign_in
from console_server import ConsoleServer
from playwright.sync_api import Page, expect

__all__ = ["browser", "page", "playwright"]  # fixtures this module uses

STORE = "/packages/console_demo/store"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    live = ConsoleServer(tmp_path_factory.mktemp("console-store"))
    try:
        for namespace, key, text in [
            (["users", "ada", "prefs"], "tone", "brief answers, no small talk"),
            (["users", "ada", "prefs"], "drink", "green tea"),
            (["users", "bob", "prefs"], "tone", "long and detailed answers"),
        ]:
            body = {"namespace": namespace, "key": key, "value": {"text": text}}
            assert live.api("PUT", f"{STORE}/items", json=body).status_code == 200
        yield live
    finally:
        live.stop()


def test_the_store_panel_browses_searches_edits_and_deletes_items(
    page: Page, server: ConsoleServer
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="console_demo").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Store").click()
    expect(page.get_by_role("heading", name="Store of console_demo")).to_be_visible()
    spaces = page.get_by_role("list", name="Namespaces")
    expect(spaces.get_by_role("button")).to_have_text(["users/ada/prefs", "users/bob/prefs"])
    rows = page.locator("table.store-items tbody tr")
    expect(rows).to_have_count(3)

    spaces.get_by_role("button", name="users/ada/prefs").click()
    expect(rows).to_have_count(2)
    search = page.get_by_role("search", name="Search the store")
    expect(search.get_by_label("Namespace starts with")).to_have_value("users/ada/prefs")
    search.get_by_label("Namespace starts with").fill("users")
    search.get_by_label("Search for").fill("short answers")
    search.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(3)
    expect(rows.first).to_have_attribute("data-item", "users/ada/prefs tone")  # nearest first
    expect(rows.first.locator("td").nth(5)).not_to_have_text("–")  # a similarity score
    shoot(page, "store")

    ada = page.locator('tr[data-item="users/ada/prefs tone"]')
    ada.get_by_role("button", name="Edit users/ada/prefs tone").click()
    form = page.get_by_role("form", name="Put an item")
    expect(form.get_by_label("Key")).to_have_value("tone")
    form.get_by_label("Value (a JSON object)").fill("{not json")
    form.get_by_role("button", name="Save item").click()
    expect(form.get_by_role("alert")).to_contain_text("The value is not JSON")
    form.get_by_label("Value (a JSON object)").fill('{"text": "one-line answers"}')
    form.get_by_role("button", name="Save item").click()
    expect(page.locator("#store-status")).to_have_text("Item tone saved in users/ada/prefs.")
    got = server.api("GET", f"{STORE}/items", params={"namespace": ["users", "ada", "prefs"], "key": "tone"})
    assert got.json()["value"] == {"text": "one-line answers"}

    form = page.get_by_role("form", name="Put an item")
    form.get_by_label("Namespace").fill("users/cy/prefs")
    form.get_by_label("Key").fill("city")
    form.get_by_label("Value (a JSON object)").fill('{"text": "Riga"}')
    form.get_by_label("Expires after (seconds)").fill("3600")
    form.get_by_role("button", name="Save item").click()
    expect(page.locator('tr[data-item="users/cy/prefs city"]')).to_be_visible()
    expect(page.locator('tr[data-item="users/cy/prefs city"] td').nth(4)).not_to_have_text("never")

    bob = page.locator('tr[data-item="users/bob/prefs tone"]')
    page.once("dialog", lambda dialog: dialog.dismiss())
    bob.get_by_role("button", name="Delete users/bob/prefs tone").click()
    expect(bob).to_be_visible()  # dismissed: kept
    page.once("dialog", lambda dialog: dialog.accept())
    bob.get_by_role("button", name="Delete users/bob/prefs tone").click()
    expect(page.locator("#store-status")).to_have_text("Item tone in users/bob/prefs deleted.")
    expect(bob).to_have_count(0)
    gone = server.api("GET", f"{STORE}/items", params={"namespace": ["users", "bob", "prefs"], "key": "tone"})
    assert gone.status_code == 404
