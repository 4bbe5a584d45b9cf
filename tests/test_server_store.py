"""``/api/packages/{package}/store``: a pack's store over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from echo_agent import echo_pack, echo_provider
from litestar.testing import TestClient

from sa_core import Runtime
from sa_core.server import create_app

ST = "/api/packages/echo/store"


@pytest.fixture
def client(sa_database_url: str) -> Iterator[TestClient[Any]]:
    other = echo_pack()
    other.name = "other"
    runtime = Runtime(
        packs=[echo_pack(), other],
        providers={"test": echo_provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as test_client:
        token, _ = test_client.blocking_portal.call(runtime.store.create_api_key, "tests")
        test_client.headers["Authorization"] = f"Bearer {token}"
        yield test_client


def test_put_get_search_list_namespaces_and_delete(client: TestClient[Any]) -> None:
    for key, text in [("a", "green tea"), ("b", "black coffee"), ("c", "tea tea tea")]:
        body = {"namespace": ["menu", "cafe"], "key": key, "value": {"text": text}}
        put = client.put(f"{ST}/items", json=body)
        assert put.status_code == 200, put.text
    assert put.json()["namespace"] == ["menu", "cafe"]
    assert put.json()["value"] == {"text": "tea tea tea"}
    client.put(f"{ST}/items", json={"namespace": ["notes"], "key": "n", "value": {"n": 1}})

    got = client.get(f"{ST}/items", params={"namespace": ["menu", "cafe"], "key": "a"})
    assert got.status_code == 200
    assert got.json()["value"] == {"text": "green tea"}
    assert got.json()["expires_at"] is None

    found = client.post(f"{ST}/items/search", json={"namespace_prefix": ["menu"], "query": "tea"})
    assert found.status_code == 200
    assert [item["key"] for item in found.json()["items"]] == ["c", "a"]
    assert found.json()["items"][0]["score"] > 0
    filtered = client.post(
        f"{ST}/items/search", json={"filter": {"text": "black coffee"}, "limit": 5}
    )
    assert [item["key"] for item in filtered.json()["items"]] == ["b"]

    spaces = client.post(f"{ST}/namespaces", json={})
    assert spaces.json() == {"namespaces": [["menu", "cafe"], ["notes"]]}
    shallow = client.post(f"{ST}/namespaces", json={"prefix": ["menu"], "max_depth": 1})
    assert shallow.json() == {"namespaces": [["menu"]]}

    gone = client.delete(f"{ST}/items", params={"namespace": ["menu", "cafe"], "key": "a"})
    assert gone.status_code == 204
    again = client.get(f"{ST}/items", params={"namespace": ["menu", "cafe"], "key": "a"})
    assert again.status_code == 404
    assert again.json()["error"] == "item_not_found"
    assert (
        client.delete(f"{ST}/items", params={"namespace": ["menu"], "key": "a"}).status_code == 404
    )
    # another package's store is another store
    other = client.post("/api/packages/other/store/items/search", json={})
    assert other.json() == {"items": []}


def test_bad_requests_say_what_is_wrong_and_the_routes_need_a_key(client: TestClient[Any]) -> None:
    bad = client.post(f"{ST}/items/search", json={"filter": {"n": {"$near": 1}}})
    assert bad.status_code == 422
    assert bad.json()["error"] == "invalid_store_request"
    assert "unknown operator(s) ['$near']" in bad.json()["errors"][0]["message"]
    no_value = client.put(f"{ST}/items", json={"namespace": ["a"], "key": "k", "value": [1]})
    assert no_value.status_code == 400
    empty = client.put(f"{ST}/items", json={"namespace": [], "key": "k", "value": {}})
    assert empty.status_code == 400
    bare = {"Authorization": ""}
    assert client.post(f"{ST}/items/search", json={}, headers=bare).status_code == 401
    assert (
        client.get(f"{ST}/items", params={"namespace": "a", "key": "k"}, headers=bare).status_code
        == 401
    )
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert set(paths[f"{ST}/items"]) == {"get", "put", "delete"}
    assert set(paths[f"{ST}/items/search"]) == {"post"}
    assert set(paths[f"{ST}/namespaces"]) == {"post"}
