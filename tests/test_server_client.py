"""The HTTP API through Litestar's test client: routes, errors, auth, files, variables (WebSocket:
test_server_websocket.py).
"""

from __future__ import annotations

import base64
import re

import pytest
from api_kit import A, Api, B, api_on_test_packs
from litestar.testing import TestClient
from test_server_packs import REASONING, REPLY, alpha_pack, provider

from sa_core import Pack, Runtime, define_agent, define_prompt, define_thread_endpoint
from sa_core.errors import ConfigurationError
from sa_core.server import create_app

api = api_on_test_packs()


# -- auth ------------------------------------------------------------------------------------


def test_every_route_needs_a_valid_key(api: Api) -> None:
    thread_id = api.thread()
    bare = {"Authorization": ""}
    for method, url in [
        ("GET", "/api/packages"),
        ("GET", f"{A}/agents"),
        ("POST", f"{A}/threads"),
        ("GET", f"{A}/threads/{thread_id}/messages"),
        ("GET", f"{A}/threads/{thread_id}/files/notes/a.txt"),
        ("GET", f"{A}/threads/{thread_id}/summary"),
    ]:
        response = api.client.request(method, url, headers=bare)
        assert response.status_code == 401, (method, url)
        assert response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith("Bearer")
    wrong = api.client.get("/api/packages", headers={"Authorization": "Bearer sa_not-a-key"})
    assert wrong.status_code == 401


def test_revoked_keys_stop_working(api: Api) -> None:
    token, row = api.call(api.runtime.store.create_api_key, "temporary")
    headers = {"Authorization": f"Bearer {token}"}
    assert api.client.get("/api/packages", headers=headers).status_code == 200
    assert api.call(api.runtime.store.revoke_api_key, row.prefix)
    assert api.client.get("/api/packages", headers=headers).status_code == 401


def test_public_pack_endpoint_and_docs_need_no_key(api: Api) -> None:
    thread_id = api.thread()
    ping = api.client.get(f"{A}/threads/{thread_id}/ping", headers={"Authorization": ""})
    assert ping.status_code == 200 and ping.text == "pong"
    assert ping.headers["content-type"].startswith("text/plain")
    schema = api.client.get("/schema/openapi.json", headers={"Authorization": ""})
    assert schema.status_code == 200


# -- catalog ---------------------------------------------------------------------------------


def test_packages_list_version_author_license_and_entry_agents(api: Api) -> None:
    packages = {p["name"]: p for p in api.client.get("/api/packages").json()["packages"]}
    assert packages["alpha"] == {
        "name": "alpha",
        "version": "1.2.0",
        "author": "Alpha Team",
        "license": "MIT",
        "description": None,
        "entry_agents": ["helper"],
        "distribution": None,
        "source": "local",
    }
    assert packages["beta"]["version"] == "0.3.0"  # from the first entry agent


def test_agent_detail_shows_sides_tools_and_variables_without_values(api: Api) -> None:
    agents = api.client.get(f"{A}/agents").json()["agents"]
    assert [a["name"] for a in agents] == ["helper"]
    detail = api.client.get(f"{A}/agents/helper").json()
    assert detail["sides"][0]["prompt"] == "main" and detail["sides"][0]["model"] == "parent"
    assert detail["tools"] == ["weather", "summarizer", "researcher"]
    variables = {v["name"]: v for v in detail["variables"]}
    assert variables["RESEARCH_KEY"]["scoped"] and variables["RESEARCH_KEY"]["type"] == "secret"
    assert variables["ALPHA_TOKEN"]["needs_value"] is False
    beta = api.client.get(f"{B}/agents/helper").json()
    assert beta["variables"][0]["name"] == "BETA_KEY" and beta["variables"][0]["needs_value"]
    assert api.client.get(f"{A}/agents/summarizer").status_code == 404  # not an entry agent
    assert api.client.get(f"{A}/agents/nobody").json()["error"] == "agent_not_found"


def test_prompts_models_and_tools(api: Api) -> None:
    prompts = {p["name"] for p in api.client.get(f"{A}/prompts").json()["prompts"]}
    assert prompts == {"main", "child_a", "child_b", "research_a"}
    models = api.client.get(f"{A}/models").json()["models"]
    assert {m["name"]: m["model"] for m in models} == {
        "parent": "parent-model",
        "child": "child-model",
    }
    assert "provider_options" not in models[0]
    tools = api.client.get(f"{A}/tools").json()["tools"]
    assert [(t["name"], t["description"], t["source"]) for t in tools] == [
        ("weather", "Weather.", "package"),
        ("finish", "Report.", "package"),
    ]


def test_openapi_schema_documents_every_route(api: Api) -> None:
    schema = api.client.get("/schema/openapi.json").json()
    paths = schema["paths"]
    thread = "/threads/{thread_id}"
    for package in ("alpha", "beta"):
        base = f"/api/packages/{package}"
        expected = {
            f"{base}/agents": {"get"},
            f"{base}/agents/{{name}}": {"get"},
            f"{base}/prompts": {"get"},
            f"{base}/models": {"get"},
            f"{base}/tools": {"get"},
            f"{base}/threads": {"get", "post"},
            f"{base}{thread}": {"get", "delete"},
            f"{base}{thread}/messages": {"get", "post"},
            f"{base}{thread}/stop": {"post"},
            f"{base}{thread}/terminate": {"post"},
            f"{base}{thread}/stream": {"get"},
            f"{base}{thread}/ws": {"get"},
            f"{base}{thread}/logs": {"get"},
            f"{base}{thread}/children": {"get"},
            f"{base}{thread}/effects": {"get"},
            f"{base}{thread}/effects/{{effect_id}}": {"delete"},
            f"{base}{thread}/files": {"get"},
            f"{base}{thread}/files/{{path}}": {"get", "put", "delete"},
            f"{base}{thread}/grep": {"get"},
            f"{base}{thread}/find": {"get"},
            f"{base}{thread}/variables/{{request_id}}": {"get", "post"},
        }
        for path, methods in expected.items():
            assert methods <= set(paths[path]), path
    assert set(paths["/api/packages/alpha/threads/{thread_id}/notes/{note_id}"]) == {"post"}
    assert "/api/packages/beta/threads/{thread_id}/summary" not in paths
    assert paths["/api/packages"]["get"]["security"] == [{"BearerKey": []}]
    assert paths[f"{A}{thread}/ping"]["get"]["security"] == []
    assert schema["components"]["securitySchemes"]["BearerKey"]["scheme"] == "bearer"


# -- threads and messages --------------------------------------------------------------------


def test_create_thread_post_message_and_read_the_reply(api: Api) -> None:
    created = api.client.post(f"{A}/threads", json={"agent": "helper", "tags": ["vip"]})
    assert created.status_code == 201
    thread = created.json()
    assert (thread["package"], thread["agent"], thread["tags"]) == ("alpha", "helper", ["vip"])
    posted = api.say(thread["id"], "Hi")
    assert posted["status"] == "queued" and posted["message"]["content"] == "Hi"
    assert posted["message_id"] == posted["message"]["id"]
    messages = api.messages(thread["id"])
    assert [(m["role"], m["content"]) for m in messages] == [("user", "Hi"), ("assistant", REPLY)]
    assert messages[1]["reasoning_content"] == REASONING
    newest = api.messages(thread["id"], order="desc", limit=1)
    assert [m["role"] for m in newest] == ["assistant"]


def test_missing_variables_answer_422_listing_them_and_secrets_never_come_back(api: Api) -> None:
    missing = api.client.post(f"{B}/threads", json={"agent": "helper"})
    assert missing.status_code == 422
    body = missing.json()
    assert body["error"] == "missing_variables"
    assert body["missing"] == [{"name": "BETA_KEY", "declared_by": "prompt 'main'"}]
    thread_id = api.thread("beta", env={"BETA_KEY": "beta-secret-value"}, tags=["t"])
    api.say(thread_id, "Hi", package="beta")
    texts = [
        api.client.get(f"{B}/threads/{thread_id}").text,
        api.client.get(f"{B}/threads").text,
        api.client.get(f"{B}/threads/{thread_id}/messages").text,
        api.client.get(f"{B}/threads/{thread_id}/logs").text,
    ]
    assert all("beta-secret-value" not in text for text in texts)
    detail = api.client.get(f"{B}/threads/{thread_id}").json()
    assert detail["env"] == [{"name": "BETA_KEY", "type": "secret"}]


def test_unknown_agent_and_bad_bodies_are_4xx(api: Api) -> None:
    unknown = api.client.post(f"{A}/threads", json={"agent": "summarizer"})
    assert unknown.status_code == 422 and unknown.json()["error"] == "unknown_agent"
    for body in [b"not json", b"[]", b'{"agent": 3}', b'{"agent": "helper", "tags": "x"}']:
        response = api.client.post(
            f"{A}/threads", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400, body
        assert response.json()["error"] == "invalid_request"
    thread_id = api.thread()
    for params in [{"limit": 0}, {"limit": 10**12}, {"offset": -1}, {"order": "sideways"}]:
        response = api.client.get(f"{A}/threads/{thread_id}/messages", params=params)
        assert response.status_code == 400, params
    bad_role = api.client.post(
        f"{A}/threads/{thread_id}/messages", json={"content": "x", "role": "tool"}
    )
    assert bad_role.status_code == 400


def test_an_unknown_package_or_route_says_which(api: Api) -> None:
    typo = api.client.get("/api/packages/alpah/threads")
    assert typo.status_code == 404
    assert typo.json() == {
        "error": "not_found",
        "detail": "No package 'alpah' is served here (did you mean 'alpha'?); "
        "GET /api/packages lists them.",
    }
    unknown = api.client.get("/api/packages/zzz/agents").json()["detail"]
    assert unknown == "No package 'zzz' is served here; GET /api/packages lists them."
    route = api.client.get(f"{A}/nothing").json()["detail"]
    assert route == (
        f"Package 'alpha' has no route GET {A}/nothing; the schema at /schema/openapi.json "
        "lists its routes."
    )


def test_a_thread_is_reachable_only_under_its_own_package(api: Api) -> None:
    thread_id = api.thread()
    for method, suffix in [
        ("GET", ""),
        ("DELETE", ""),
        ("GET", "/messages"),
        ("POST", "/stop"),
        ("GET", "/files"),
        ("GET", "/logs"),
        ("GET", "/ws"),
    ]:
        response = api.client.request(method, f"{B}/threads/{thread_id}{suffix}")
        assert response.status_code == 404, (method, suffix)
        assert response.json()["error"] == "thread_not_found"
    listed = api.client.get(f"{B}/threads").json()
    assert listed["total"] == 0
    assert api.client.get(f"{A}/threads/{thread_id}").status_code == 200


def test_list_threads_pages_and_filters_by_agent_and_tag(api: Api) -> None:
    ids = [api.thread(tags=["even" if i % 2 == 0 else "odd"]) for i in range(5)]
    page = api.client.get(f"{A}/threads", params={"limit": 2}).json()
    assert page["total"] == 5 and page["has_more"] and len(page["threads"]) == 2
    assert [t["id"] for t in page["threads"]] == ids[::-1][:2]  # newest first
    rest = api.client.get(f"{A}/threads", params={"limit": 2, "offset": 4}).json()
    assert len(rest["threads"]) == 1 and not rest["has_more"]
    even = api.client.get(f"{A}/threads", params={"tag": "even"}).json()
    assert even["total"] == 3
    assert api.client.get(f"{A}/threads", params={"agent": "nobody"}).json()["total"] == 0


def test_subagent_children_logs_and_delete_with_descendants(api: Api) -> None:
    parent = api.thread()
    api.say(parent, "summarize please")
    children = api.client.get(f"{A}/threads/{parent}/children").json()["children"]
    # a non-resumable child terminates once it has reported
    assert [(c["name"], c["status"]) for c in children] == [("summarizer", "terminated")]
    child = children[0]["reference"]
    assert api.client.get(f"{A}/threads/{parent}").json()["children"][0]["reference"] == child
    listed = api.client.get(f"{A}/threads", params={"include_children": True}).json()
    assert {t["id"] for t in listed["threads"]} == {parent, child}
    assert api.client.get(f"{A}/threads").json()["total"] == 1
    logs = api.client.get(f"{A}/threads/{parent}/logs").json()["logs"]
    assert logs and all(log["type"] == "llm_call" for log in logs)
    deleted = api.client.delete(f"{A}/threads/{parent}")
    assert deleted.status_code == 200 and set(deleted.json()["deleted"]) == {parent, child}
    assert api.client.get(f"{A}/threads/{child}").status_code == 404
    assert api.client.delete(f"{A}/threads/{parent}").status_code == 404


def test_stop_and_terminate(api: Api) -> None:
    thread_id = api.thread()
    stopped = api.client.post(f"{A}/threads/{thread_id}/stop")
    assert stopped.json() == {"id": thread_id, "status": "stopped", "terminated_at": None}
    api.say(thread_id, "Hi")  # a stopped thread continues with the next message
    terminated = api.client.post(f"{A}/threads/{thread_id}/terminate").json()
    assert terminated["status"] == "terminated" and terminated["terminated_at"] > 0
    refused = api.client.post(f"{A}/threads/{thread_id}/messages", json={"content": "more"})
    assert refused.status_code == 409 and refused.json()["error"] == "thread_terminated"
    assert api.client.get(f"{A}/threads/{thread_id}").json()["terminated_at"] is not None


def test_scheduled_effects_list_and_cancel(api: Api) -> None:
    thread_id = api.thread()
    effect_id = api.client.post(f"{A}/threads/{thread_id}/remind").json()["effect_id"]
    effects = api.client.get(f"{A}/threads/{thread_id}/effects").json()["effects"]
    assert [(e["id"], e["name"], e["args"]) for e in effects] == [
        (effect_id, "remind", {"note": "later"})
    ]
    assert api.client.delete(f"{A}/threads/{thread_id}/effects/{effect_id}").status_code == 204
    assert api.client.get(f"{A}/threads/{thread_id}/effects").json()["effects"] == []
    again = api.client.delete(f"{A}/threads/{thread_id}/effects/{effect_id}")
    assert again.status_code == 404 and again.json()["error"] == "effect_not_found"


# -- files -----------------------------------------------------------------------------------


def test_files_round_trip(api: Api) -> None:
    thread_id = api.thread()
    files = f"{A}/threads/{thread_id}/files"
    blob = bytes(range(256)) * 4
    up = api.client.put(
        f"{files}/data/blob.bin", content=blob, headers={"Content-Type": "application/x-thing"}
    )
    assert up.status_code == 201
    assert up.json()["path"] == "/data/blob.bin" and up.json()["size"] == len(blob)
    text = api.client.put(
        f"{files}/data/notes.txt", content=b"alpha\nneedle here\n", headers={"Content-Type": ""}
    )
    assert text.json()["mime_type"] == "text/plain"
    down = api.client.get(f"{files}/data/blob.bin")
    assert down.status_code == 200 and down.content == blob
    assert down.headers["content-type"] == "application/x-thing"
    assert "blob.bin" in down.headers["content-disposition"]
    root = api.client.get(files).json()
    assert [e["name"] for e in root["entries"]] == ["data"] and root["file_count"] == 2
    listing = api.client.get(files, params={"path": "/data"}).json()
    assert [e["name"] for e in listing["entries"]] == ["blob.bin", "notes.txt"]
    grep = api.client.get(f"{A}/threads/{thread_id}/grep", params={"pattern": "need.e"}).json()
    assert grep["results"] == [
        {
            "path": "/data/notes.txt",
            "name": "notes.txt",
            "matches": ["needle here"],
            "line_numbers": [2],
        }
    ]
    found = api.client.get(f"{A}/threads/{thread_id}/find", params={"pattern": "*.bin"}).json()
    assert [f["path"] for f in found["files"]] == ["/data/blob.bin"]
    assert api.client.get(f"{files}/data").json()["error"] == "is_a_directory"
    assert api.client.delete(f"{files}/data/blob.bin").status_code == 204
    assert api.client.get(f"{files}/data/blob.bin").status_code == 404
    not_empty = api.client.delete(f"{files}/data")
    assert not_empty.status_code == 400
    assert not_empty.json() == {
        "error": "directory_not_empty",
        "detail": "Directory /data is not empty; add ?recursive=true to delete it with "
        "everything in it.",
    }
    assert api.client.delete(f"{files}/data", params={"recursive": True}).status_code == 204
    assert api.client.get(files).json()["file_count"] == 0


def test_file_paths_cannot_leave_the_thread(api: Api) -> None:
    mine, other = api.thread(), api.thread()
    api.client.put(f"{A}/threads/{other}/files/secret.txt", content=b"theirs")
    for path in ["%2e%2e/secret.txt", "a/%2E%2E/%2e%2e/secret.txt", "a/..%2F..%2Fsecret.txt"]:
        response = api.client.get(f"{A}/threads/{mine}/files/{path}")
        assert response.status_code in (400, 404), path
        assert b"theirs" not in response.content
    up = api.client.put(f"{A}/threads/{mine}/files/%2e%2e/%2e%2e/x.txt", content=b"x")
    assert up.status_code == 400 and up.json()["error"] == "invalid_path"
    listing = api.client.get(f"{A}/threads/{mine}/files", params={"path": "/../.."})
    assert listing.status_code == 400
    assert api.client.get(f"{A}/threads/{mine}/files/secret.txt").status_code == 404


def test_message_attachments_are_stored_as_files(api: Api) -> None:
    thread_id = api.thread()
    data = base64.b64encode(b"PNGDATA").decode()
    posted = api.client.post(
        f"{A}/threads/{thread_id}/messages",
        json={
            "content": "see",
            "attachments": [{"name": "a.png", "mime_type": "image/png", "data": data}],
        },
    )
    assert posted.status_code == 202
    api.idle()
    ref = posted.json()["message"]["attachments"][0]
    assert ref["path"].startswith("/attachments/") and ref["name"] == "a.png"
    assert api.client.get(f"{A}/threads/{thread_id}/files{ref['path']}").content == b"PNGDATA"
    bad = api.client.post(
        f"{A}/threads/{thread_id}/messages",
        json={"content": "x", "attachments": [{"name": "b", "data": "not base64!"}]},
    )
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_attachment"


# -- variables bootstrap and pack endpoints --------------------------------------------------


def test_variables_bootstrap_boots_the_deferred_subagent(api: Api) -> None:
    parent = api.thread()
    api.say(parent, "research please")
    tool_row = next(m for m in api.messages(parent) if m["role"] == "tool")
    match = re.search(r"/variables/([\w-]+)", tool_row["content"])
    assert match, tool_row["content"]
    url = f"{A}/threads/{parent}/variables/{match.group(1)}"
    request = api.client.get(url).json()
    assert request["missing"] == ["RESEARCH_KEY"] and request["agent_name"] == "researcher"
    assert request["parent_thread_id"] == parent
    assert api.client.get(f"{B}/threads/{parent}/variables/{match.group(1)}").status_code == 404
    incomplete = api.client.post(url, json={"env": {}})
    assert incomplete.status_code == 422
    booted = api.client.post(url, json={"env": {"RESEARCH_KEY": "research-secret"}})
    assert booted.status_code == 201, booted.text
    child = booted.json()["child_thread_id"]
    assert booted.json()["status"] == "success"
    api.idle()
    child_view = api.client.get(f"{A}/threads/{child}")
    assert child_view.json()["parent_id"] == parent
    assert "research-secret" not in child_view.text
    assert api.client.get(url).status_code == 404  # used up


def test_pack_thread_endpoints(api: Api) -> None:
    thread_id = api.thread()
    api.say(thread_id, "Hi")
    summary = api.client.get(f"{A}/threads/{thread_id}/summary", params={"x": "1"}).json()
    assert summary == {"thread_id": thread_id, "messages": 2, "query": {"x": "1"}}
    note = api.client.post(f"{A}/threads/{thread_id}/notes/n1", content=b"remember")
    assert note.status_code == 201 and note.json() == {"path": "/notes/n1.txt", "size": 8}
    assert api.client.get(f"{A}/threads/{thread_id}/files/notes/n1.txt").content == b"remember"
    refused = api.client.post(f"{A}/threads/{thread_id}/notes/n-1", content=b"x")
    assert refused.status_code == 400
    assert refused.json() == {"error": "invalid_note", "detail": "Note ids are letters and digits."}
    assert api.client.get(f"{A}/threads/missing/summary").status_code == 404


def test_a_pack_endpoint_shadowing_a_builtin_route_fails_at_startup(sa_database_url: str) -> None:
    prompt = define_prompt(name="main", model="parent", prompt="x")
    pack = Pack(
        name="clash",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[alpha_pack().models[0]],
        endpoints=[define_thread_endpoint(path="messages/extra", handler=lambda r, s: {})],
    )
    runtime = Runtime(packs=[pack], database_url=sa_database_url, load_entrypoints=False)
    with pytest.raises(BaseExceptionGroup) as caught, TestClient(create_app(runtime)):
        pass
    assert caught.group_contains(ConfigurationError, match="built-in thread route")


def test_the_plugin_embeds_the_api_in_another_litestar_app(sa_database_url: str) -> None:
    from litestar import Litestar, get

    from sa_core.server import StandardAgentsPlugin

    @get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    runtime = Runtime(
        packs=[alpha_pack()],
        providers={"test": provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    app = Litestar(route_handlers=[health], plugins=[StandardAgentsPlugin(runtime)])
    with TestClient(app) as client:
        assert client.get("/health").json() == {"status": "ok"}  # not behind the API keys
        assert client.get("/api/packages").status_code == 401
        token, _ = client.blocking_portal.call(runtime.store.create_api_key, "embedded")
        listed = client.get("/api/packages", headers={"Authorization": f"Bearer {token}"})
        assert [p["name"] for p in listed.json()["packages"]] == ["alpha"]
        missing = client.get(f"{A}/threads/nope", headers={"Authorization": f"Bearer {token}"})
        assert missing.json()["error"] == "thread_not_found"
        paths = client.get("/schema/openapi.json").json()["paths"]
        assert "/health" in paths and f"{A}/threads/{{thread_id}}/messages" in paths
    assert not runtime.is_open  # the plugin closed the runtime it started


def test_uploads_over_10_mb_need_a_raised_limit(sa_database_url: str) -> None:
    from litestar import Litestar

    from sa_core.server import StandardAgentsPlugin

    big = b"0" * 10_500_000
    for limit, status in [(None, 413), (50_000_000, 201)]:
        runtime = Runtime(
            packs=[alpha_pack()],
            providers={"test": provider()},
            database_url=sa_database_url,
            load_entrypoints=False,
        )
        app = (
            create_app(runtime)
            if limit is None
            else Litestar(plugins=[StandardAgentsPlugin(runtime)], request_max_body_size=limit)
        )
        with TestClient(app) as client:
            token, _ = client.blocking_portal.call(runtime.store.create_api_key, "t")
            client.headers["Authorization"] = f"Bearer {token}"
            thread = client.post(f"{A}/threads", json={"agent": "helper"}).json()["id"]
            up = client.put(f"{A}/threads/{thread}/files/big.bin", content=big)
            assert up.status_code == status, up.text
