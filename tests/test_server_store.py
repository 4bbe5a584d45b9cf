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
        test_client.runtime = runtime  # type: ignore[attr-defined]
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


def test_a_packs_embedding_model_ranks_searches_and_its_failure_is_a_502(
    sa_database_url: str,
) -> None:
    from sa_core import StoreConfig, define_model
    from sa_core.errors import ProviderError
    from sa_core.testing import FunctionProvider

    class Flaky(FunctionProvider):
        failing = False

        async def embed(self, request: Any) -> Any:
            if self.failing:
                raise ProviderError("test: HTTP 503 (server_error): down", "server_error", 503)
            return await super().embed(request)

    provider = Flaky(lambda request: "ok")
    pack = echo_pack()
    pack.models = [*pack.models, define_model(name="e", provider="test", model="h", kind="embedding")]
    pack.store = StoreConfig(embedding_model="e")
    runtime = Runtime(
        packs=[pack], providers={"test": provider}, database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as client:
        token, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {token}"
        for key, text in [("a", "a cup of tea"), ("b", "black coffee")]:
            body = {"namespace": ["menu"], "key": key, "value": {"text": text}}
            assert client.put(f"{ST}/items", json=body).status_code == 200
        found = client.post(f"{ST}/items/search", json={"query": "teas"}).json()["items"]
        assert [item["key"] for item in found] == ["a", "b"]
        assert found[0]["score"] > found[1]["score"]
        provider.failing = True
        failed = client.put(f"{ST}/items", json={"namespace": ["m"], "key": "c", "value": {"t": "x"}})
        assert failed.status_code == 502
        assert failed.json()["error"] == "embedding_failed"
        assert client.post(f"{ST}/items/search", json={"query": "x"}).status_code == 502


def test_a_key_scoped_to_another_package_gets_404_and_a_read_only_key_only_reads(
    client: TestClient[Any],
) -> None:
    portal = client.blocking_portal
    store = client.runtime.store  # type: ignore[attr-defined]
    other, _ = portal.call(lambda: store.create_api_key("other", packages=["other"]))
    reader, _ = portal.call(lambda: store.create_api_key("reader", packages=["echo"], read_only=True))
    body = {"namespace": ["n"], "key": "k", "value": {"text": "hello"}}
    assert client.put(f"{ST}/items", json=body).status_code == 200
    as_other = {"Authorization": f"Bearer {other}"}
    for method, path, kwargs in [
        ("PUT", "/items", {"json": body}),
        ("GET", "/items", {"params": {"namespace": "n", "key": "k"}}),
        ("DELETE", "/items", {"params": {"namespace": "n", "key": "k"}}),
        ("POST", "/items/search", {"json": {}}),
        ("POST", "/namespaces", {"json": {}}),
    ]:
        answer = client.request(method, f"{ST}{path}", headers=as_other, **kwargs)
        assert answer.status_code == 404, (method, path, answer.text)
    assert client.post("/api/packages/other/store/items/search", json={}, headers=as_other).json() == {
        "items": []
    }
    as_reader = {"Authorization": f"Bearer {reader}"}
    assert client.post(f"{ST}/items/search", json={}, headers=as_reader).status_code == 200
    got = client.get(f"{ST}/items", params={"namespace": "n", "key": "k"}, headers=as_reader)
    assert got.status_code == 200
    assert client.put(f"{ST}/items", json=body, headers=as_reader).status_code == 403
