"""The console's server side: the page, offline docs, thumbnails, and the routes it added."""

from __future__ import annotations

import asyncio
import io
import re
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
from litestar.testing import TestClient
from PIL import Image
from test_server_packs import alpha_pack, provider

from sa_core import Runtime
from sa_core.server import create_app
from sa_core.server.console import STATIC_DIR
from sa_core.testing import FunctionProvider
from sa_core.thumbnails import THUMBNAIL_SIZE

A = "/api/packages/alpha"


def png(width: int, height: int, color: tuple[int, int, int] = (10, 120, 200)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


def make_client(database_url: str, model: Any = None, **options: Any) -> TestClient[Any]:
    runtime = Runtime(
        packs=[alpha_pack()],
        providers={"test": model or provider()},
        database_url=database_url,
        load_entrypoints=False,
    )
    return TestClient(create_app(runtime, **options))


@pytest.fixture
def client(sa_database_url: str) -> Iterator[TestClient[Any]]:
    with make_client(sa_database_url) as test_client:
        runtime = test_client.app.plugins.get("StandardAgentsPlugin").runtime
        token, _ = test_client.blocking_portal.call(runtime.store.create_api_key, "tests")
        test_client.headers["Authorization"] = f"Bearer {token}"
        yield test_client


class Refs(HTMLParser):
    """Collects every src/href of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [value for name, value in attrs if name in ("src", "href") and value]


def page_refs(html: str) -> list[str]:
    parser = Refs()
    parser.feed(html)
    return parser.refs


EXTERNAL = re.compile(r"""(?:https?:)?//[^\s"'`)<>]+""")
ALLOWED = {"http://www.w3.org/2000/svg"}  # an XML namespace name, never fetched


def external_urls(text: str) -> list[str]:
    found = []
    for match in EXTERNAL.findall(text):
        host = re.sub(r"^(?:https?:)?//", "", match).split("/")[0].split(":")[0]
        if match in ALLOWED or host in ("127.0.0.1", "localhost", "[::1]") or not host:
            continue
        found.append(match)
    return found


# -- the page and the docs -------------------------------------------------------------------


def test_the_console_page_is_served_at_the_root_without_a_key_and_loads_only_local_assets(
    sa_database_url: str,
) -> None:
    with make_client(sa_database_url) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        refs = page_refs(page.text)
        assert "/_sa/static/js/app.js" in refs and "/_sa/static/console.css" in refs
        for ref in refs:
            if ref.startswith("/_sa/"):
                assert client.get(ref).status_code == 200, ref
        assert (
            client.get("/_sa/static/js/thread.js")
            .headers["content-type"]
            .startswith(("text/javascript", "application/javascript"))
        )
        assert client.get("/api/packages").status_code == 401  # the data still needs a key


def test_no_shipped_console_file_references_an_external_url() -> None:
    own = [p for p in STATIC_DIR.rglob("*") if p.is_file() and "vendor" not in p.parts]
    assert {p.name for p in own} >= {"index.html", "console.css", "app.js", "markdown.js"}
    problems = {str(p.relative_to(STATIC_DIR)): external_urls(p.read_text()) for p in own}
    assert {k: v for k, v in problems.items() if v} == {}


@pytest.mark.parametrize("path", ["/", "/schema", "/schema/swagger", "/schema/redoc"])
def test_served_pages_load_scripts_styles_and_icons_from_this_server_only(
    sa_database_url: str, path: str
) -> None:
    with make_client(sa_database_url) as client:
        page = client.get(path)
        assert page.status_code == 200, page.text
        refs = page_refs(page.text)
        assert refs, "the page loads no assets at all"
        assert [r for r in refs if external_urls(r)] == []
        for ref in refs:
            assert client.get(ref).status_code == 200, ref


def test_vendored_docs_assets_are_the_ones_the_notice_names() -> None:
    notice = (STATIC_DIR / "vendor" / "NOTICE").read_text()
    for name in (
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
        "swagger-ui.css",
        "redoc.standalone.js",
    ):
        assert name in notice
        assert list((STATIC_DIR / "vendor").rglob(name)), name
    assert (STATIC_DIR / "vendor" / "swagger-ui" / "LICENSE").exists()
    assert (STATIC_DIR / "vendor" / "redoc" / "LICENSE").exists()


def test_without_the_ui_the_root_is_not_served_but_the_api_and_offline_docs_are(
    sa_database_url: str,
) -> None:
    with make_client(sa_database_url, ui=False) as client:
        assert client.get("/").status_code == 404
        docs = client.get("/schema/swagger")
        assert docs.status_code == 200
        assert "/_sa/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text
        assert client.get("/_sa/static/vendor/swagger-ui/swagger-ui-bundle.js").status_code == 200
        assert client.get("/api/packages").status_code == 401


def test_sa_serve_has_a_no_ui_flag() -> None:
    import argparse

    from sa_core.cli import serve

    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers())
    assert parser.parse_args(["serve"]).ui is True
    assert parser.parse_args(["serve", "--no-ui"]).ui is False


# -- thumbnails ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_get_file_thumbnail_shrinks_images_keeps_aspect_and_is_none_for_other_files(
    sa_runtime_factory: Any,
) -> None:
    async with sa_runtime_factory(packs=[alpha_pack()], providers={"test": provider()}) as rt:
        thread = await rt.create_thread("helper")
        await thread.write_file("/pics/wide.png", png(1000, 500), "image/png")
        await thread.write_file("/pics/small.png", png(40, 30), "image/png")
        await thread.write_file("/notes.txt", "not an image")
        await thread.write_file("/fake.png", b"not really a png", "image/png")
        wide = await thread.get_file_thumbnail("/pics/wide.png")
        assert wide is not None and wide.startswith(b"\x89PNG")
        assert Image.open(io.BytesIO(wide)).size == (THUMBNAIL_SIZE, THUMBNAIL_SIZE // 2)
        small = await thread.get_file_thumbnail("/pics/small.png")
        assert small is not None and Image.open(io.BytesIO(small)).size == (40, 30)
        assert await thread.get_file_thumbnail("/notes.txt") is None
        assert await thread.get_file_thumbnail("/fake.png") is None
        assert await thread.get_file_thumbnail("/missing.png") is None
        assert await thread.get_file_thumbnail("/pics") is None


@pytest.mark.asyncio
async def test_thumbnails_are_cached_per_file_version(
    sa_runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sa_core import thumbnails

    made: list[int] = []
    real = thumbnails.make_thumbnail

    def counting(data: bytes, max_size: int = THUMBNAIL_SIZE) -> bytes | None:
        made.append(len(data))
        return real(data, max_size)

    monkeypatch.setattr(thumbnails, "make_thumbnail", counting)
    async with sa_runtime_factory(packs=[alpha_pack()], providers={"test": provider()}) as rt:
        thread = await rt.create_thread("helper")
        await thread.write_file("/a.png", png(600, 600, (255, 0, 0)), "image/png")
        first = await thread.get_file_thumbnail("/a.png")
        assert await thread.get_file_thumbnail("/a.png") == first
        assert len(made) == 1
        await asyncio.sleep(0.001)  # a later write time
        await thread.write_file("/a.png", png(600, 300, (0, 255, 0)), "image/png")
        second = await thread.get_file_thumbnail("/a.png")
        assert len(made) == 2
        assert second is not None and Image.open(io.BytesIO(second)).size == (256, 128)


def test_a_file_is_served_as_a_thumbnail_with_thumbnail_1(client: TestClient[Any]) -> None:
    thread_id = client.post(f"{A}/threads", json={"agent": "helper"}).json()["id"]
    put = client.put(
        f"{A}/threads/{thread_id}/files/pics/big.png",
        content=png(900, 300),
        headers={"Content-Type": "image/png"},
    )
    assert put.status_code == 201
    client.put(
        f"{A}/threads/{thread_id}/files/readme.txt",
        content=b"hi",
        headers={"Content-Type": "text/plain"},
    )
    full = client.get(f"{A}/threads/{thread_id}/files/pics/big.png")
    assert Image.open(io.BytesIO(full.content)).size == (900, 300)
    small = client.get(f"{A}/threads/{thread_id}/files/pics/big.png", params={"thumbnail": 1})
    assert small.status_code == 200 and small.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(small.content)).size == (256, 85)
    text = client.get(f"{A}/threads/{thread_id}/files/readme.txt", params={"thumbnail": 1})
    assert text.status_code == 404 and text.json()["error"] == "no_thumbnail"


# -- queue, status filter, graph -------------------------------------------------------------


def test_queued_messages_are_listed_and_can_be_cancelled_and_running_threads_filter_by_status(
    sa_database_url: str,
) -> None:
    gate = threading.Event()

    async def slow(request: Any) -> str:
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return "finally"

    with make_client(sa_database_url, FunctionProvider(slow)) as client:
        runtime = client.app.plugins.get("StandardAgentsPlugin").runtime
        token, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {token}"
        busy = client.post(f"{A}/threads", json={"agent": "helper"}).json()["id"]
        fresh = client.post(f"{A}/threads", json={"agent": "helper"}).json()["id"]
        try:
            client.post(f"{A}/threads/{busy}/messages", json={"content": "first"})
            client.post(f"{A}/threads/{busy}/messages", json={"content": "second"})
            queue = client.get(f"{A}/threads/{busy}/queue").json()["queue"]
            assert [(q["content"], q["role"]) for q in queue] == [("second", "user")]
            running = client.get(f"{A}/threads", params={"status": "running"}).json()
            assert [t["id"] for t in running["threads"]] == [busy] and running["total"] == 1
            new = client.get(f"{A}/threads", params={"status": "new"}).json()
            assert [t["id"] for t in new["threads"]] == [fresh]
            assert client.delete(f"{A}/threads/{busy}/queue/{queue[0]['id']}").status_code == 204
            assert client.get(f"{A}/threads/{busy}/queue").json()["queue"] == []
            again = client.delete(f"{A}/threads/{busy}/queue/{queue[0]['id']}")
            assert again.status_code == 404 and again.json()["error"] == "queue_entry_not_found"
        finally:
            gate.set()
        client.blocking_portal.call(runtime.wait_idle, 10)
        contents = [
            m["content"] for m in client.get(f"{A}/threads/{busy}/messages").json()["messages"]
        ]
        assert "second" not in contents and contents[-1] == "finally"
        waiting = client.get(f"{A}/threads", params={"status": "awaiting_human"}).json()
        assert [t["id"] for t in waiting["threads"]] == [busy]
        bad = client.get(f"{A}/threads", params={"status": "sleeping"})
        assert bad.status_code == 400


def test_status_filter_pages_newest_first(client: TestClient[Any]) -> None:
    ids = [client.post(f"{A}/threads", json={"agent": "helper"}).json()["id"] for _ in range(5)]
    first = client.get(f"{A}/threads", params={"status": "new", "limit": 2}).json()
    second = client.get(f"{A}/threads", params={"status": "new", "limit": 2, "offset": 2}).json()
    assert first["total"] == 5 and first["has_more"] is True
    assert [t["id"] for t in first["threads"] + second["threads"]] == ids[::-1][:4]


def test_the_graph_names_agents_prompts_tools_and_subagent_edges(client: TestClient[Any]) -> None:
    graph = client.get(f"{A}/graph").json()
    nodes = {n["id"]: n for n in graph["nodes"]}
    edges = {(e["source"], e["target"], e["kind"]) for e in graph["edges"]}
    assert nodes["agent:helper"]["entry"] is True and nodes["agent:helper"]["type"] == "ai_human"
    helper_prompt = next(t for s, t, k in edges if s == "agent:helper" and k == "side_a")
    assert (helper_prompt, "agent:summarizer", "subagent") in edges
    assert (helper_prompt, "tool:weather", "tool") in edges
    assert nodes["agent:summarizer"]["entry"] is False
