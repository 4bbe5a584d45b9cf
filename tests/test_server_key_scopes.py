"""Scoped API keys: a key limited to some packages, and a read-only key, on every route.

One live server (loopback, SQLite and PostgreSQL) hosts the packs ``alpha`` and ``beta`` of
``test_server_packs``. The walks read ``/schema/openapi.json`` and call every operation it
lists, so a route added later is covered without touching this file; the protocols that are
not in the schema (``/mcp``, ``/a2a``, the WebSocket upgrade), ``/v1`` and ``/ag-ui`` are driven
after.

- A key of ``beta`` gets, from every operation of ``alpha``, the very 404 a package that is not
  served gets; it never sees ``alpha`` in ``GET /api/packages``, ``/v1/models``, MCP
  ``tools/list`` or the A2A index, and ``alpha``'s thread ids are 404 wherever an id is looked up
  (an AG-UI ``threadId`` of ``alpha``'s is a client's own id to ``beta``: a thread of its own).
- A read-only key gets 403 from every write: every operation that is not ``GET``, except the
  two that read by nature, named in ``READS_BY_NATURE``: the pack store's search and namespace
  list take their query as a ``POST`` body. The JSON-RPC protocols carry reads in ``POST``
  bodies too, so there the reads are told apart by method, and named below: MCP
  ``initialize`` and ``tools/list``, A2A ``GetTask``.
- Keys made before (no scope) are unchanged: full access, and only they manage keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from test_server_packs import alpha_pack, beta_pack, provider

from sa_core import Runtime
from sa_core.server import create_app
from sa_core.server.protocols.openai.respids import conversation_id, response_id
from sa_core.server.testing import live_server

pytestmark = pytest.mark.asyncio

PACKAGES = ("alpha", "beta")
ENV = {"alpha": {}, "beta": {"BETA_KEY": "b"}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
A2A_HEADERS = {"A2A-Version": "1.0"}
READS_BY_NATURE = {
    "/store/items/search": "a full-text search of the pack store: the body is the query",
    "/store/namespaces": "lists the pack store's namespaces: the body is the prefix and page",
}
"""The operations that are not ``GET`` but only read, so a read-only key may call them."""
WRITE_BODIES: dict[str, Any] = {
    "/store/items/search": {"query": "needle"},
    "/store/namespaces": {},
    "/store/items": {"namespace": ["notes"], "key": "k", "value": {"text": "walk"}},
    "/schedules": {"name": "walk", "agent": "helper", "every": "1h", "message": "Hi"},
    "/threads": {"agent": "helper"},
    "/messages": {"content": "Hi"},
    "/approvals/{tool_call_id}": {"approve": True},
    "/variables/{request_id}": {"env": {"X": "1"}},
    "/api/keys": {"name": "walk"},
}
"""Valid bodies for the writes that take JSON, so a refusal is the key's, not the body's."""


@dataclass
class Scene:
    """The server, its runtime, a key of each kind and a thread with a turn per package."""

    url: str
    runtime: Runtime
    full: str
    beta: str
    reader: str
    threads: dict[str, str]
    first_messages: dict[str, str]

    def client(self, key: str) -> httpx.AsyncClient:
        """An HTTP client of the server sending ``key``."""
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60)


@pytest_asyncio.fixture
async def scene(sa_database_url: str) -> AsyncIterator[Scene]:
    runtime = Runtime(
        packs=[alpha_pack(), beta_pack()],
        providers={"test": provider(chunk_size=None)},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    async with live_server(create_app(runtime)) as url:
        store = runtime.store
        full = (await store.create_api_key("admin"))[0]
        beta = (await store.create_api_key("beta team", packages=["beta"]))[0]
        reader = (await store.create_api_key("auditors", read_only=True))[0]
        threads, first = {}, {}
        for package in PACKAGES:
            thread = await runtime.create_thread("helper", package=package, env=ENV[package])
            sent = await thread.send_message("Hi", wait=True)
            await thread.write_file("/notes/a.txt", b"needle", "text/plain")
            threads[package], first[package] = thread.thread_id, sent.id
        yield Scene(url, runtime, full, beta, reader, threads, first)


async def operations(scene: Scene) -> list[tuple[str, str, dict[str, Any]]]:
    """``(method, path template, operation)`` of every operation of the OpenAPI schema."""
    async with httpx.AsyncClient(base_url=scene.url) as http:
        schema = (await http.get("/schema/openapi.json")).json()
    return [
        (method.upper(), path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def package_of(path: str) -> str | None:
    """The package an operation belongs to (``None``: ``/api/packages``, ``/api/keys``, ``/v1``)."""
    match = re.match(r"^/api/packages/([^/{]+)/", path)
    return match.group(1) if match else None


def concrete(path: str, thread_id: str) -> str:
    """The operation's URL: ``thread_id`` a real thread, the other parameters made up."""
    filled = path.replace("{thread_id}", thread_id).replace("{path}", "notes/a.txt")
    return re.sub(r"\{[a-z_]+\}", "x", filled.replace("{name}", "helper"))


def body_of(method: str, path: str) -> dict[str, Any]:
    """The request arguments of a write: a valid body where the route takes one."""
    if method in ("GET", "DELETE"):
        return {}
    for suffix, body in WRITE_BODIES.items():
        if path.endswith(suffix):
            return {"json": body}
    return {"content": b"written", "headers": {"Content-Type": "application/octet-stream"}}


async def call(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """Call an operation; a live stream is closed once its status and headers are in."""
    async with http.stream(method, url, **kwargs) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
        return response


def refused_by_scope(response: httpx.Response) -> bool:
    """Whether the key was refused: 401, 403, or the 404 of a package it does not open."""
    if response.status_code in (401, 403):
        return True
    return response.status_code == 404 and "is served here" in response.text


def is_public(operation: dict[str, Any]) -> bool:
    """A pack endpoint declared ``public``: it needs no key, so no key's scope narrows it."""
    return operation.get("security") == []


async def no_package_answer(http: httpx.AsyncClient, package: str) -> dict[str, Any]:
    """What a request to a package that is not served gets."""
    missing = await http.get(f"/api/packages/{package}/agents")
    assert missing.status_code == 404
    return dict(missing.json())


async def state_of(scene: Scene) -> dict[str, Any]:
    """What a write would change: threads, their messages, files and values, per package."""
    store = scene.runtime.store
    found: dict[str, Any] = {}
    for package in PACKAGES:
        rows, total = await store.list_threads(package=package)
        found[package] = {"threads": total}
        for row in rows:
            thread = await scene.runtime.get_thread(row.id)
            page = await thread.get_messages(limit=100)
            files = await thread.readdir_file("/notes") if row.parent_id is None else []
            found[package][row.id] = (
                [(m.role, m.content) for m in page.messages],
                sorted(f.path for f in files),
                await thread.read_file("/notes/a.txt"),
                len(await thread.get_scheduled_effects()),
                row.terminated,
                row.stopped,
            )
        pack_store = scene.runtime.pack_store(package)
        found[package]["store"] = [i.key for i in await pack_store.search((), limit=100)]
        found[package]["schedules"] = len(await scene.runtime.schedules.list(package))
    found["keys"] = len(await store.list_api_keys())
    return found


# -- a key of one package ------------------------------------------------------------------


async def test_every_operation_of_another_package_answers_a_key_of_one_package_404(
    scene: Scene,
) -> None:
    before = await state_of(scene)
    async with scene.client(scene.beta) as http:
        unknown = await no_package_answer(http, "gamma")
        checked, public = [], []
        for method, path, operation in await operations(scene):
            if package_of(path) != "alpha":
                continue
            url = concrete(path, scene.threads["alpha"])
            response = await call(http, method, url, **body_of(method, path))
            if is_public(operation):  # reached without a key by anyone: the key plays no part
                public.append(path)
                assert response.status_code == 200, (method, path)
                continue
            assert response.status_code == 404, (method, path, response.text)
            assert response.json() == {
                "error": unknown["error"],
                "detail": unknown["detail"].replace("gamma", "alpha"),
            }, (method, path)
            checked.append((method, path))
        # the package's own operations still answer the key (a read of each)
        for method, path, _ in await operations(scene):
            if package_of(path) == "beta" and method == "GET":
                url = concrete(path, scene.threads["beta"])
                assert not refused_by_scope(await call(http, method, url)), path
    assert public == ["/api/packages/alpha/threads/{thread_id}/ping"]
    methods = {m for m, _ in checked}
    assert {"GET", "POST", "PUT", "DELETE"} <= methods and len(checked) >= 25
    assert await state_of(scene) == before  # not one write reached alpha


async def test_a_key_of_one_package_never_sees_another_in_any_list(scene: Scene) -> None:
    from mcp_serve_kit import mcp_client

    async with scene.client(scene.beta) as http:
        packages = (await http.get("/api/packages")).json()["packages"]
        assert [p["name"] for p in packages] == ["beta"]
        models = (await http.get("/v1/models")).json()["data"]
        assert [m["id"] for m in models] == ["beta/helper"]
        cards = (await http.get("/a2a")).json()["agents"]
        assert [c["name"] for c in cards] == ["helper"]
        assert [i["url"] for c in cards for i in c["supportedInterfaces"]] == [
            f"{scene.url}/a2a/beta/helper"
        ]
    async with mcp_client(f"{scene.url}/mcp", scene.beta) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["beta__helper"]
        called = await client.call_tool("alpha__helper", {"message": "Hi"})
        assert called.is_error
        assert (
            called.content[0].text == "Unknown tool 'alpha__helper'; tools/list names the agents."
        )


async def test_the_protocols_and_streams_of_another_package_answer_404(scene: Scene) -> None:
    from websockets.asyncio.client import connect

    alpha = scene.threads["alpha"]
    async with scene.client(scene.beta) as http:
        # /v1: another package's model is OpenAI's 404 for a model the key cannot access
        for method, url, body, name in (
            ("GET", "/v1/models/alpha/helper", None, "alpha/helper"),
            ("GET", "/v1/models/alpha:helper", None, "alpha:helper"),
            ("POST", "/v1/chat/completions",
             {"model": "alpha/helper", "messages": [{"role": "user", "content": "Hi"}]},
             "alpha/helper"),
            ("POST", "/v1/responses", {"model": "alpha:helper", "input": "Hi"}, "alpha:helper"),
        ):  # fmt: skip
            refused = await http.request(method, url, json=body)
            assert refused.status_code == 404, url
            error = refused.json()["error"]
            assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
            assert error["message"] == (
                f"The model '{name}' does not exist or you do not have access to it (this "
                "API key's models: beta/helper)."
            )
        assert (await http.get("/v1/models/beta/helper")).status_code == 200
        # /mcp of the package, /a2a of its agent
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        mcp = await http.post("/api/packages/alpha/mcp", json=initialize, headers=MCP_HEADERS)
        assert mcp.status_code == 404 and mcp.json()["error"] == "not_found"
        get_task = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x.y"}}
        a2a = await http.post("/a2a/alpha/helper", json=get_task)
        assert a2a.status_code == 404
        assert a2a.json() == {
            "error": "agent_not_found",
            "detail": "No A2A agent at /a2a/alpha/helper.",
        }
        # AG-UI: another package's agent is the 404 of a package that is not served
        unknown = await no_package_answer(http, "gamma")
        run = {"threadId": "t-1", "runId": "r-1", "messages": [
            {"id": "u-1", "role": "user", "content": "Hi"}]}  # fmt: skip
        agui = await http.post("/ag-ui/alpha/helper", json=run)
        assert agui.status_code == 404
        assert agui.json() == {
            "error": unknown["error"],
            "detail": unknown["detail"].replace("gamma", "alpha"),
        }
        own = await http.post("/ag-ui/beta/helper", json={**run, "threadId": scene.threads["beta"]})
        assert own.status_code == 200 and '"type":"RUN_FINISHED"' in own.text
        assert own.headers["x-sa-thread-id"] == scene.threads["beta"]
        # the server-sent events of a thread of the package
        sse = await call(http, "GET", f"/api/packages/alpha/threads/{alpha}/stream")
        assert sse.status_code == 404 and "No package 'alpha'" in sse.json()["detail"]
    ws_base = scene.url.replace("http://", "ws://") + "/api/packages"
    header = {"Authorization": f"Bearer {scene.beta}"}
    async with connect(f"{ws_base}/alpha/threads/{alpha}/ws", additional_headers=header) as ws:
        await ws.wait_closed()
    assert ws.close_code == 4404
    assert ws.close_reason == "No package 'alpha' is served here; GET /api/packages lists them."
    beta = scene.threads["beta"]
    async with connect(f"{ws_base}/beta/threads/{beta}/ws", additional_headers=header) as ws:
        assert json.loads(await ws.recv()) == {"type": "connected", "thread_id": beta}


async def test_thread_ids_of_another_package_are_404_wherever_an_id_is_looked_up(
    scene: Scene,
) -> None:
    from mcp_serve_kit import mcp_client

    alpha = scene.threads["alpha"]
    alpha_response = response_id(alpha, scene.first_messages["alpha"])
    async with scene.client(scene.beta) as http:
        by_route = await http.get(f"/api/packages/beta/threads/{alpha}")
        assert by_route.status_code == 404 and by_route.json()["error"] == "thread_not_found"
        stored = await http.get(f"/v1/responses/{alpha_response}")
        assert stored.status_code == 404 and stored.json()["error"]["code"] == "not_found"
        for field, value in (
            ("previous_response_id", alpha_response),
            ("conversation", conversation_id(alpha)),
        ):
            body = {"model": "beta/helper", "input": "Hi", field: value}
            continued = await http.post("/v1/responses", json=body)
            assert continued.status_code == 404 and continued.json()["error"]["param"] == field
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
        send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {**message, "contextId": alpha}}}  # fmt: skip
        answer = (await http.post("/a2a/beta/helper", json=send, headers=A2A_HEADERS)).json()
        assert "Unknown contextId" in answer["error"]["message"]
    async with scene.client(scene.full) as http:  # a key of every package reads it as before
        assert (await http.get(f"/v1/responses/{alpha_response}")).status_code == 200
    async with mcp_client(f"{scene.url}/mcp", scene.beta) as client:
        called = await client.call_tool("beta__helper", {"message": "Hi", "thread_id": alpha})
        assert called.is_error
        assert called.content[0].text == f"Agent 'beta/helper' has no thread '{alpha}'."


async def test_an_ag_ui_thread_id_of_another_package_never_reaches_its_thread(
    scene: Scene,
) -> None:
    alpha = scene.threads["alpha"]
    before = await state_of(scene)
    run = {"threadId": alpha, "runId": "r-1", "state": {"mood": "calm"},
           "messages": [{"id": "u-1", "role": "user", "content": "Hi"}]}  # fmt: skip
    async with scene.client(scene.beta) as http:
        answered = await http.post("/ag-ui/beta/helper", json=run)
    # to beta's agent, alpha's thread id is a client's own id: it starts a thread of beta's
    # agent (which needs BETA_KEY: without it the run cannot start), never alpha's thread
    assert answered.status_code == 200 and "x-sa-thread-id" not in answered.headers
    assert '"code":"missing_variables"' in answered.text
    assert f'"threadId":"{alpha}"' in answered.text  # the client's id, echoed
    assert await state_of(scene) == before
    assert await scene.runtime.store.list_values(alpha) == {}


# -- a read-only key -----------------------------------------------------------------------


async def test_every_write_answers_a_read_only_key_403_and_every_read_is_served(
    scene: Scene,
) -> None:
    before = await state_of(scene)
    writes, reads = [], []
    async with scene.client(scene.reader) as http:
        for method, path, operation in await operations(scene):
            package = package_of(path)
            url = concrete(path, scene.threads[package or "alpha"])
            response = await call(http, method, url, **body_of(method, path))
            if path.startswith("/api/keys"):  # managing keys needs full access, reads too
                assert response.status_code == 403, (method, path)
                assert response.json()["error"] == "admin_only", path
                continue
            if method == "GET":
                reads.append(path)
                assert not refused_by_scope(response), path
                continue
            if is_public(operation):
                continue  # needs no key (none of the public endpoints writes here anyway)
            if any(path.endswith(suffix) for suffix in READS_BY_NATURE):
                reads.append(path)
                assert response.status_code == 200, (path, response.text)
                continue
            writes.append((method, path))
            assert response.status_code == 403, (method, path, response.text)
            body = response.json()
            if path.startswith("/v1/"):
                assert body["error"]["code"] == "read_only_key", path
                detail = body["error"]["message"]
            else:
                assert body["error"] == "read_only_key", path
                detail = body["detail"]
            assert detail.startswith(
                "This API key (read-only, every package) may list and read packages, threads, "
                "messages, files, logs and live streams, but not create threads, send messages, "
                "approve tool calls, set values or variables, stop, terminate or delete threads, "
                "or write files."
            ), path
            assert f"{method} {url.split('?')[0]} needs a read-write key." in detail, path
    assert {m for m, _ in writes} == {"POST", "PUT", "DELETE"} and len(writes) >= 25
    assert "/api/packages/alpha/threads/{thread_id}/stream" in reads
    assert "/api/packages/beta/store/items/search" in reads
    assert await state_of(scene) == before  # nothing was written


async def test_a_read_only_key_reads_over_mcp_and_a2a_and_may_not_call_or_send(
    scene: Scene,
) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_serve_kit import mcp_client
    from websockets.asyncio.client import connect

    before = await state_of(scene)
    async with mcp_client(f"{scene.url}/mcp", scene.reader) as client:  # initialize: a read
        names = [t.name for t in (await client.list_tools()).tools]  # tools/list: a read
        assert names == ["alpha__helper", "beta__helper"]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("alpha__helper", {"message": "Hi"})
    assert "may list and read" in str(refused.value)
    assert "The JSON-RPC method 'tools/call' needs a read-write key." in str(refused.value)
    async with scene.client(scene.reader) as http:
        get_task = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x.y"}}
        # GetTask: a read
        read = await http.post("/a2a/alpha/helper", json=get_task, headers=A2A_HEADERS)
        assert read.status_code == 200 and read.json()["id"] == 7
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
        for method in ("SendMessage", "SendStreamingMessage", "CancelTask", "message/send"):
            params = {"id": "x.y"} if method == "CancelTask" else {"message": message}
            rpc = {"jsonrpc": "2.0", "id": 8, "method": method, "params": params}
            sent = await http.post("/a2a/alpha/helper", json=rpc, headers=A2A_HEADERS)
            assert sent.status_code == 403, method
            assert sent.json()["id"] == 8 and sent.json()["error"]["code"] == -32003
            assert f"The JSON-RPC method '{method}' needs a read-write key." in sent.text
        run = {"threadId": "t-1", "runId": "r-1", "messages": []}
        agui = await http.post("/ag-ui/alpha/helper", json=run)
        assert agui.status_code == 403 and agui.json()["error"] == "read_only_key"
        assert "POST /ag-ui/alpha/helper needs a read-write key." in agui.json()["detail"]
    alpha = scene.threads["alpha"]
    url = scene.url.replace("http://", "ws://") + f"/api/packages/alpha/threads/{alpha}/ws"
    token = {"access_token": scene.reader}
    async with connect(f"{url}?{httpx.QueryParams(token)}") as ws:  # a stream is a read
        assert json.loads(await ws.recv()) == {"type": "connected", "thread_id": alpha}
    assert await state_of(scene) == before


# -- unscoped keys, and managing keys ------------------------------------------------------


async def test_a_key_without_scope_reaches_every_package_as_before(scene: Scene) -> None:
    from mcp_serve_kit import mcp_client

    async with scene.client(scene.full) as http:
        for method, path, _ in await operations(scene):
            if method == "GET" and package_of(path) is not None:
                url = concrete(path, scene.threads[str(package_of(path))])
                assert not refused_by_scope(await call(http, method, url)), path
        packages = (await http.get("/api/packages")).json()["packages"]
        assert [p["name"] for p in packages] == ["alpha", "beta"]
        models = (await http.get("/v1/models")).json()["data"]
        assert [m["id"] for m in models] == ["alpha/helper", "beta/helper"]
        assert len((await http.get("/a2a")).json()["agents"]) == 2
        # an unknown model stays a 400 for it, as before scopes
        chat = {"model": "gamma/helper", "messages": [{"role": "user", "content": "Hi"}]}
        assert (await http.post("/v1/chat/completions", json=chat)).status_code == 400
    async with mcp_client(f"{scene.url}/mcp", scene.full) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        assert tools == ["alpha__helper", "beta__helper"]


async def test_only_a_key_with_full_access_manages_keys(scene: Scene) -> None:
    async with scene.client(scene.full) as admin:
        created = await admin.post(
            "/api/keys", json={"name": "beta readers", "packages": ["beta"], "read_only": True}
        )
        assert created.status_code == 201
        new = created.json()
        assert (new["packages"], new["read_only"], new["prefix"]) == (
            ["beta"],
            True,
            new["key"][:11],
        )
        listed = (await admin.get("/api/keys")).json()["keys"]
        assert [(k["name"], k["packages"], k["read_only"]) for k in listed] == [
            ("admin", None, False),
            ("beta team", ["beta"], False),
            ("auditors", None, True),
            ("beta readers", ["beta"], True),
        ]
        assert all("key" not in k for k in listed)
        wrong = await admin.post("/api/keys", json={"packages": ["gamma", "delta"]})
        assert wrong.status_code == 422
        assert wrong.json()["detail"] == (
            "No packages 'delta', 'gamma' are served here; a key can open alpha, beta."
        )
        empty = await admin.post("/api/keys", json={"packages": []})
        assert empty.status_code == 422 and "leave it out" in empty.json()["detail"]
    async with scene.client(new["key"]) as team:
        assert [p["name"] for p in (await team.get("/api/packages")).json()["packages"]] == ["beta"]
        thread = await team.post("/api/packages/beta/threads", json={"agent": "helper"})
        assert thread.status_code == 403 and thread.json()["error"] == "read_only_key"
    for key, access in (
        (scene.beta, "read-write, package beta"),
        (scene.reader, "read-only, every package"),
    ):
        async with scene.client(key) as scoped:
            for method, url in (
                ("GET", "/api/keys"),
                ("POST", "/api/keys"),
                ("DELETE", f"/api/keys/{new['id']}"),
            ):
                refused = await scoped.request(method, url, json={} if method == "POST" else None)
                assert refused.status_code == 403, (key, url)
                assert refused.json() == {
                    "error": "admin_only",
                    "detail": f"{method} {url} needs an API key with full access (every "
                    f"package, read-write); this key is {access}.",
                }
    async with scene.client(scene.full) as admin:
        revoked = await admin.delete(f"/api/keys/{new['id']}")
        assert revoked.status_code == 200 and revoked.json()["keys"][0]["revoked_at"]
        assert (await admin.delete(f"/api/keys/{new['id']}")).status_code == 404
    async with scene.client(new["key"]) as team:
        assert (await team.get("/api/packages")).status_code == 401
