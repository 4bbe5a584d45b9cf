"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

One live ``sa serve`` (with the console test kit's scripted offline model) serves every test of
this module. The browser, the page (which fails a test on a JavaScript error or a request
leaving the server), screenshots and sign-in come from ``console_browser_kit.py``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_browser_kit import browser, page, playwright, shoot, sign_in
from console_server import ConsoleServer
from playwright.sync_api import Page, expect

__all__ = ["browser", "page", "playwright"]  # fixtures this module uses


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    live = ConsoleServer(tmp_path_factory.mktemp("console"))  # recorded: the Replay button
    try:
        yield live
    finally:
        live.stop()


def test_a_wrong_key_is_refused_with_a_message_and_the_right_key_signs_in_by_keyboard(
    page: Page, server: ConsoleServer
) -> None:
    page.goto(server.url + "/")
    shoot(page, "01-sign-in")
    key_input = page.get_by_label("API key")
    expect(key_input).to_be_focused()
    page.keyboard.type("sa_not-a-real-key")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("not accepted")
    expect(key_input).to_have_value("")  # a wrong key is not kept on the page either
    expect(key_input).to_be_focused()
    page.keyboard.type(server.key)  # keyboard only: focus, type, Enter
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Packs")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('sa_api_key')") == server.key
    assert page.evaluate("localStorage.length") == 0
    expect(page.get_by_role("link", name="console_demo")).to_be_visible()
    shoot(page, "02-packs")


def test_a_pack_shows_its_agents_and_starts_a_thread_that_streams_answers_and_tool_calls(
    page: Page, server: ConsoleServer
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="console_demo").click()
    expect(page.get_by_role("heading", name="console_demo")).to_be_visible()
    expect(page.get_by_text("version 1.2.3 · by Console Tests · license MIT")).to_be_visible()
    agent = page.get_by_role("region", name=re.compile("Lead"))
    expect(agent.get_by_text("scout, vault", exact=True)).to_be_visible()  # subagent relationships
    expect(page.locator("svg.graph")).to_be_visible()
    shoot(page, "03-pack")
    start = page.get_by_role("form", name="Start a thread with lead")
    start.get_by_label("Tags (comma separated)").fill("browser")
    start.get_by_role("button", name="Start a thread with lead").click()
    expect(page.get_by_role("tab", name="Conversation")).to_have_attribute("aria-selected", "true")
    url_before = page.url

    expect(page.locator("ol.messages")).to_be_attached()
    page.evaluate(
        """() => {
          window.seen = [];
          const list = document.querySelector(".messages");
          new MutationObserver(() => {
            const answers = list.querySelectorAll(".msg.r-assistant .md");
            if (answers.length) window.seen.push(answers[answers.length - 1].textContent);
          }).observe(list, { childList: true, subtree: true, characterData: true });
        }"""
    )
    composer = page.get_by_label("Message", exact=True)
    composer.fill("hello console")
    composer.press("Enter")
    final = "You said: hello console. This answer streams in small pieces."
    expect(page.locator(".msg.r-assistant")).to_contain_text(final)
    seen = page.evaluate("window.seen")
    partial = {text for text in seen if text and len(text) < len(final)}
    assert len(partial) >= 3, f"the answer did not arrive in pieces: {seen}"
    expect(page.locator(".msg.r-assistant strong", has_text="hello console")).to_be_visible()
    assert page.url == url_before  # no reload, no navigation: the answer came over the stream
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1

    composer.fill("please use tools")
    composer.press("Enter")
    expect(page.locator(".msg.r-assistant").last).to_contain_text("All done: I saved a note")
    call = page.locator("details.tool", has_text="Tool call: note")
    expect(call).to_be_visible()
    call.locator("summary").click()
    expect(call).to_contain_text("Remember the console test.")
    expect(call).to_contain_text("Saved /notes/note.md")
    page.get_by_label("Show reasoning").check()
    expect(page.locator("details.reasoning").first).to_contain_text("The user asked for tools")
    shoot(page, "04-conversation")


def _thread_with_children(server: ConsoleServer) -> str:
    created = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"})
    thread_id = created.json()["id"]
    server.api(
        "POST",
        f"/packages/console_demo/threads/{thread_id}/messages",
        json={"content": "use tools now"},
    )
    deadline = time.monotonic() + 60
    while True:
        detail = server.api("GET", f"/packages/console_demo/threads/{thread_id}").json()
        if detail["children"] and not detail["running"] and detail["status"]:
            return str(thread_id)
        if time.monotonic() > deadline:
            raise AssertionError(f"the scripted turn did not finish in 60 s: {detail}")
        time.sleep(0.05)


def test_the_subagent_tree_links_to_the_child_and_back(page: Page, server: ConsoleServer) -> None:
    thread_id = _thread_with_children(server)
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}/subagents")
    child = page.get_by_role("link", name=re.compile("scout · first scout"))
    expect(child).to_be_visible()
    shoot(page, "05-subagents")
    child.click()
    expect(page.get_by_role("link", name="↑ Back to the parent thread")).to_be_visible()
    expect(page.locator(".msg").first).to_contain_text("Look around.")
    expect(page.locator(".msg .who", has_text="Side A · worker").first).to_be_visible()
    shoot(page, "06-child")
    page.get_by_role("link", name="↑ Back to the parent thread").click()
    expect(page.get_by_text(f"Thread {thread_id}")).to_be_visible()


def test_files_upload_lists_the_file_and_logs_show_tokens_and_cost(
    page: Page, server: ConsoleServer, tmp_path: Path
) -> None:
    thread_id = _thread_with_children(server)
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}/files")
    expect(page.get_by_role("button", name="notes/")).to_be_visible()
    upload = tmp_path / "hello.txt"
    upload.write_text("hello from the browser test\n")
    page.get_by_label("Upload to this folder").set_input_files(str(upload))
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("cell", name="hello.txt", exact=True)).to_be_visible()
    listing = server.api("GET", f"/packages/console_demo/threads/{thread_id}/files?path=/").json()
    assert "hello.txt" in [e["name"] for e in listing["entries"]]
    page.get_by_label("Search", exact=True).fill("browser test")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_role("button", name="/hello.txt")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download hello.txt").click()
    assert Path(download.value.path()).read_text() == "hello from the browser test\n"
    shoot(page, "07-files")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete hello.txt").click()
    expect(page.get_by_role("cell", name="hello.txt", exact=True)).to_have_count(0)
    listing = server.api("GET", f"/packages/console_demo/threads/{thread_id}/files?path=/")
    assert "hello.txt" not in [e["name"] for e in listing.json()["entries"]]

    page.get_by_role("tab", name="Files").focus()
    page.keyboard.press("ArrowRight")  # the tab list is keyboard reachable
    expect(page.get_by_role("tab", name="Logs & cost")).to_be_focused()
    expect(page.get_by_role("tab", name="Logs & cost")).to_have_attribute("aria-selected", "true")
    row = page.locator("table.logs tbody tr", has_text="lead-1").first
    expect(row).to_be_visible()
    expect(row).to_contain_text("console_script")
    tokens = row.locator("td.num").first.inner_text()
    assert int(tokens) > 0
    totals = page.locator("table.totals")
    expect(totals).to_contain_text("With 1 descendant thread(s)")
    own_calls = int(totals.locator("tbody tr").nth(0).locator("td").nth(0).inner_text())
    all_calls = int(totals.locator("tbody tr").nth(1).locator("td").nth(0).inner_text())
    assert all_calls > own_calls >= 2
    shoot(page, "08-logs")


def test_threads_list_filters_by_status_and_tag_newest_first(
    page: Page, server: ConsoleServer
) -> None:
    _thread_with_children(server)
    tagged = server.api(
        "POST", "/packages/console_demo/threads", json={"agent": "lead", "tags": ["only-me"]}
    ).json()
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/threads")
    rows = page.locator("table tbody tr")
    expect(rows.first).to_contain_text(tagged["id"][:8])  # newest first
    page.get_by_label("Tag").fill("only-me")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    page.get_by_label("Tag").fill("")
    page.get_by_label("Status").select_option("new")
    page.get_by_role("button", name="Filter").click()
    expect(rows.first).to_contain_text(tagged["id"][:8])
    for status in rows.locator(".badge").all_inner_texts():
        assert status == "new"
    shoot(page, "09-threads")


def test_the_api_docs_load_without_reaching_outside(page: Page, server: ConsoleServer) -> None:
    page.goto(server.url + "/schema")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Standard Agents")
    page.goto(server.url + "/schema/redoc")
    expect(page.locator("h1", has_text="Standard Agents")).to_be_visible()
    shoot(page, "10-docs", full_page=False)  # ReDoc's full page is ~150,000 px tall


def test_a_subagent_waiting_for_variables_shows_a_form_that_boots_it_without_echoing_the_secret(
    page: Page, server: ConsoleServer
) -> None:
    thread_id = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"}).json()[
        "id"
    ]
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("open the vault")
    composer.press("Enter")
    call = page.locator("details.tool", has_text="Tool call: subagent_create")
    expect(call).to_be_visible()
    call.locator("summary").click()
    secret = call.get_by_label("VAULT_TOKEN (secret)")
    expect(secret).to_have_attribute("type", "password")
    secret.fill("vault-secret-123")
    call.get_by_role("button", name="Provide variables and start the subagent").click()
    expect(call.get_by_role("link", name="open it")).to_be_visible()
    assert "vault-secret-123" not in page.content()
    children = server.api("GET", f"/packages/console_demo/threads/{thread_id}/children").json()[
        "children"
    ]
    assert [c["name"] for c in children] == ["vault"]
    assert "vault-secret-123" not in str(
        server.api("GET", f"/packages/console_demo/threads/{children[0]['reference']}").json()
    )


def test_markdown_is_rendered_and_html_in_messages_is_shown_as_text(
    page: Page, server: ConsoleServer
) -> None:
    thread_id = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"}).json()[
        "id"
    ]
    hostile = '<img src=x onerror="window.pwned=1"> **bold** [x](javascript:alert(1)) `<b>code</b>`'
    server.api(
        "POST", f"/packages/console_demo/threads/{thread_id}/messages", json={"content": hostile}
    )
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}")
    first = page.locator(".msg.r-user .md").first
    expect(first).to_contain_text('<img src=x onerror="window.pwned=1">')
    expect(first.locator("strong")).to_have_text("bold")
    expect(first.locator("code")).to_have_text("<b>code</b>")
    assert first.locator("img").count() == 0
    assert first.locator("a").count() == 0  # a javascript: link keeps its label only
    assert page.evaluate("window.pwned") is None


def test_an_image_sent_with_a_message_is_previewed_from_its_thumbnail(
    page: Page, server: ConsoleServer, tmp_path: Path
) -> None:
    from PIL import Image

    picture = tmp_path / "red.png"
    Image.new("RGB", (800, 400), (200, 30, 30)).save(picture, format="PNG")
    created = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"})
    thread_id = created.json()["id"]
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}")
    page.get_by_label("Attach files").set_input_files(str(picture))
    composer = page.get_by_label("Message", exact=True)
    composer.fill("a red picture")
    composer.press("Enter")
    preview = page.locator(".msg.r-user").get_by_role("img", name="Preview of red.png")
    expect(preview).to_be_visible()
    expect(preview).to_have_js_property("naturalWidth", 256)  # 800 x 400 scaled to 256 px
    expect(preview).to_have_js_property("naturalHeight", 128)
    expect(page.locator(".msg.r-assistant")).to_contain_text("You said: a red picture")
    files = server.api("GET", f"/packages/console_demo/threads/{thread_id}/files?path=/attachments")
    assert [e["mime_type"] for e in files.json()["entries"]] == ["image/png"]


def test_terminate_asks_first_then_the_thread_refuses_messages(
    page: Page, server: ConsoleServer
) -> None:
    created = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"})
    thread_id = created.json()["id"]
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Terminate").click()
    expect(page.locator(".thread-head [role=status]")).to_have_text("new")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Terminate").click()
    expect(page.locator(".thread-head [role=status]")).to_have_text("terminated")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("anyone there?")
    composer.press("Enter")
    expect(page.locator(".composer [role=status]")).to_contain_text("terminated")


def test_starting_a_thread_asks_for_variables_masks_secrets_and_never_shows_them_again(
    page: Page, server: ConsoleServer
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="console_demo").click()
    keeper = page.get_by_role("form", name="Start a thread with keeper")
    secret = keeper.get_by_label(re.compile("^KEEPER_TOKEN"))
    expect(secret).to_have_attribute("type", "password")
    expect(keeper.get_by_label(re.compile("^KEEPER_REGION"))).to_have_attribute("type", "text")
    secret.fill("keeper-secret-456")
    keeper.get_by_label(re.compile("^KEEPER_REGION")).fill("north")
    keeper.get_by_role("button", name="Start a thread with keeper").click()
    expect(
        page.get_by_text("Variables: KEEPER_REGION (text), KEEPER_TOKEN (secret)")
    ).to_be_visible()
    assert "keeper-secret-456" not in page.content()
    page.go_back()
    expect(page.get_by_role("form", name="Start a thread with keeper")).to_be_visible()
    expect(
        page.get_by_role("form", name="Start a thread with keeper").get_by_label(
            re.compile("^KEEPER_TOKEN")
        )
    ).to_have_value("")


def test_a_message_queued_during_a_turn_is_listed_live_and_can_be_cancelled(
    page: Page, server: ConsoleServer
) -> None:
    created = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"})
    thread_id = created.json()["id"]
    messages = f"/packages/console_demo/threads/{thread_id}/messages"
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}/queue")
    expect(page.get_by_text("Nothing is queued.")).to_be_visible()
    server.api("POST", messages, json={"content": "slow please"})
    server.api("POST", messages, json={"content": "second thoughts"})
    cancel = page.get_by_role("button", name=re.compile("^Cancel queued message"))
    expect(page.get_by_text("second thoughts")).to_be_visible()
    shoot(page, "11-queue")
    cancel.click()
    expect(page.get_by_text("Nothing is queued.")).to_be_visible()
    page.get_by_role("tab", name="Conversation").click()
    expect(page.locator(".msg.r-assistant")).to_contain_text("Finally done.")
    contents = [m["content"] for m in server.api("GET", messages).json()["messages"]]
    assert "second thoughts" not in contents


def test_the_schedules_panel_lists_creates_pauses_resumes_and_deletes_schedules(
    page: Page, server: ConsoleServer
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="console_demo").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Schedules").click()
    expect(page.get_by_role("heading", name="Schedules of console_demo")).to_be_visible()
    digest = page.locator("tr[data-schedule=daily_digest]")
    expect(digest).to_contain_text("every 1d")
    expect(digest).to_contain_text("pack")
    form = page.get_by_role("form", name="Create a schedule")
    form.get_by_label("Name").fill("weekday_report")
    form.get_by_label("Agent").select_option("lead")
    form.get_by_label("Runs on").select_option("cron")
    form.get_by_label("Interval or cron expression").fill("0 8 * * 1-8")
    form.get_by_label("Time zone").fill("Europe/Nowhere")
    form.get_by_label("Message", exact=True).fill("Report, please.")
    form.get_by_role("button", name="Create schedule").click()
    status = form.get_by_role("status")
    expect(status).to_contain_text("Schedule 'weekday_report' has 2 problem(s)")
    expect(status.locator("li")).to_have_count(2)
    expect(status.locator("li").first).to_contain_text("cron '0 8 * * 1-8' is not a valid")
    form.get_by_label("Interval or cron expression").fill("0 8 * * 1-5")
    form.get_by_label("Time zone").fill("Europe/Riga")
    form.get_by_role("button", name="Create schedule").click()
    expect(page.get_by_role("status").first).to_have_text("Schedule weekday_report created.")
    report = page.locator("tr[data-schedule=weekday_report]")
    expect(report).to_contain_text("cron 0 8 * * 1-5 (Europe/Riga)")
    expect(report).to_contain_text("active")
    shoot(page, "schedules")
    report.get_by_role("button", name="Pause weekday_report").click()
    expect(report).to_contain_text("paused")
    expect(report.get_by_role("button", name="Resume weekday_report")).to_be_visible()
    report.get_by_role("button", name="Resume weekday_report").click()
    expect(report).to_contain_text("active")
    page.once("dialog", lambda dialog: dialog.dismiss())
    report.get_by_role("button", name="Delete weekday_report").click()
    expect(report).to_be_visible()  # dismissed: kept
    page.once("dialog", lambda dialog: dialog.accept())
    report.get_by_role("button", name="Delete weekday_report").click()
    expect(page.get_by_role("status").first).to_have_text("Schedule weekday_report deleted.")
    expect(page.locator("tr[data-schedule=weekday_report]")).to_have_count(0)
    listed = server.api("GET", "/packages/console_demo/schedules").json()["schedules"]
    assert [s["name"] for s in listed] == ["daily_digest"]


def test_the_keys_view_makes_a_read_only_key_of_one_pack_that_sees_only_that_pack(
    page: Page, server: ConsoleServer
) -> None:
    sign_in(page, server)
    page.get_by_role("link", name="Keys").click()
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    form = page.get_by_role("form", name="Create a key")
    form.get_by_label("Name").fill("demo team")
    form.get_by_label("Every package").uncheck()
    form.get_by_label("console_demo", exact=True).check()
    form.get_by_label("Read-only (may list and read, not write)").check()
    form.get_by_role("button", name="Create key").click()
    shown = page.get_by_label("The new API key")
    expect(shown).to_contain_text("sa_")
    token = (shown.text_content() or "").strip()
    row = page.get_by_role("row", name=re.compile("demo team"))
    expect(row).to_contain_text("read-only, console_demo")
    shoot(page, "12-keys")

    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("API key").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Packs")).to_be_visible()
    expect(page.get_by_role("link", name="console_demo")).to_be_visible()
    expect(page.locator("ul.cards > li")).to_have_count(1)  # the other packs are not listed
    page.get_by_role("link", name="Keys").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "needs an API key with full access (every package, read-write); this key is "
        "read-only, package console_demo."
    )

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, server)
    page.get_by_role("link", name="Keys").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile("Revoke demo team")).click()
    expect(page.get_by_role("row", name=re.compile("demo team"))).to_contain_text("revoked")
    refused = httpx.get(
        f"{server.url}/api/packages", headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert refused.status_code == 401


def _thread_with_answers(server: ConsoleServer, *texts: str) -> str:
    thread_id = server.api("POST", "/packages/console_demo/threads", json={"agent": "lead"}).json()["id"]
    messages = f"/packages/console_demo/threads/{thread_id}/messages"
    for number, text in enumerate(texts, 1):
        server.api("POST", messages, json={"content": text})
        deadline = time.monotonic() + 60
        while True:
            page = server.api("GET", messages).json()["messages"]
            done = [m for m in page if m["role"] == "assistant" and m["status"] == "completed"]
            if len(done) == number:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the scripted turn did not finish in 60 s: {page}")
            time.sleep(0.05)
    return str(thread_id)


def test_fork_from_here_opens_the_fork_and_rewind_to_here_rolls_the_thread_back(
    page: Page, server: ConsoleServer
) -> None:
    thread_id = _thread_with_answers(server, "first question", "second question")
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}")
    answers = page.locator(".msg.r-assistant")
    expect(answers).to_have_count(2)
    answers.first.get_by_role("button", name=re.compile("^Fork from here")).click()
    expect(page.locator(".lineage")).to_contain_text("Forked from thread")
    fork_id = page.url.split("/t/")[1].split("/")[0]
    assert fork_id != thread_id
    expect(page.locator(".msg:not([hidden])")).to_have_count(2)
    expect(page.locator(".msg.r-user")).to_contain_text("first question")
    composer = page.get_by_label("Message", exact=True)
    composer.fill("only in the fork")
    composer.press("Enter")
    expect(page.locator(".msg.r-assistant").last).to_contain_text("only in the fork")
    shoot(page, "15-fork")

    page.locator(".lineage a").first.click()  # back to the source, through the lineage
    expect(page.locator(".lineage")).to_contain_text("Fork: thread")
    expect(page.locator(".msg.r-assistant")).to_have_count(2)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(".msg.r-assistant").first.get_by_role("button", name=re.compile("^Rewind to here")).click()
    expect(page.locator(".msg:not([hidden])")).to_have_count(2)
    expect(page.locator(".lineage")).to_contain_text("Rewound to message")
    expect(page.locator(".lineage")).to_contain_text("2 message(s) left the history")
    page.get_by_label("Show rewound messages").check()
    rewound = page.locator(".msg.rewound")
    expect(rewound).to_have_count(2)
    expect(rewound.first).to_contain_text("second question")
    shoot(page, "16-rewind")
    history = server.api("GET", f"/packages/console_demo/threads/{thread_id}/messages").json()
    assert [m["content"] for m in history["messages"]][0] == "first question"
    assert history["total"] == 2
    page.once("dialog", lambda dialog: dialog.accept())  # undo: rewind to the rewound answer
    rewound.last.get_by_role("button", name=re.compile("^Rewind to here")).click()
    expect(page.locator(".msg.rewound")).to_have_count(0)
    expect(page.locator(".msg:not([hidden])")).to_have_count(4)


def test_replay_shows_its_report_next_to_the_thread_with_a_jump_to_the_divergence(
    page: Page, server: ConsoleServer
) -> None:
    thread_id = _thread_with_answers(server, "a question to replay")
    sign_in(page, server)
    page.goto(f"{server.url}/#/p/console_demo/t/{thread_id}")
    expect(page.locator(".msg.r-assistant")).to_have_count(1)
    page.get_by_role("button", name="Replay", exact=True).click()
    report = page.get_by_label("Replay report")
    expect(report).to_contain_text("Identical: the replay did what the recording did.")
    expect(report).to_contain_text("1 model answer(s) served from the recording")
    shoot(page, "17-replay")
    report.get_by_role("link", name=re.compile("^replay thread")).click()
    replay_id = page.url.split("/t/")[1].split("/")[0]
    assert replay_id != thread_id
    expect(page.locator(".msg.r-assistant")).to_have_count(1)
    expect(page.locator(".msg.r-user")).to_contain_text("a question to replay")

    # a divergence as the replay route reports it: what changed, and where the replay stopped
    page.evaluate(
        """async () => {
            const { replayReport } = await import("/_sa/static/js/timetravel.js");
            const box = document.createElement("section");
            box.setAttribute("aria-label", "Divergent replay report");
            document.body.append(box);
            box.replaceChildren(...replayReport({ packageName: "console_demo" }, {
                identical: false, thread_id: "replay-1", model_calls: 1,
                tool_results_served: 0, tool_executions: 0,
                divergence: { kind: "request_changed", path: "root/researcher#1", ordinal: 2,
                    summary: "the system prompt changed", diff: "-Be brief.\\n+Be long." },
                divergences: [{}, {}],
            }));
        }"""
    )
    diverged = page.get_by_label("Divergent replay report")
    expect(diverged).to_contain_text(
        "Diverged (and 1 more): request changed at root/researcher#1, call 2"
    )
    expect(diverged.locator("figure")).to_contain_text("What changed")
    expect(diverged.locator("pre.diff")).to_contain_text("+Be long.")
    jump = diverged.get_by_role("link", name="Jump to the divergence")
    assert jump.get_attribute("href") == "#/p/console_demo/t/replay-1/subagents"

