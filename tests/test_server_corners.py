"""HTTP corners: bodies that are not objects, bad grep patterns, unknown WebSocket packages,
413s that say the limit, OPTIONS with Allow, schema-strict fields, stop on a terminated
thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.exceptions import WebSocketDisconnect
from litestar.testing import TestClient
from test_server_packs import alpha_pack, beta_pack, provider

from sa_core import Runtime
from sa_core.server.testing import signed_in_client

A = "/api/packages/alpha"


@pytest.fixture
def client(sa_database_url: str) -> Iterator[TestClient[Any]]:
    runtime = Runtime(
        packs=[alpha_pack(), beta_pack()],
        providers={"test": provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with signed_in_client(runtime) as test_client:
        yield test_client


def new_thread(client: TestClient[Any]) -> str:
    response = client.post(f"{A}/threads", json={"agent": "helper"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"", "The request body is empty; send a JSON object (Content-Type: application/json)"),
        (b"null", "The request body must be a JSON object, not null;"),
        (b"3", "The request body must be a JSON object, not an integer;"),
        (b'"x"', "The request body must be a JSON object, not a string;"),
        (b"[]", "The request body must be a JSON object, not an array;"),
    ],
)
def test_an_empty_or_non_object_body_names_what_is_wrong(
    client: TestClient[Any], body: bytes, detail: str
) -> None:
    thread = new_thread(client)
    for url in (f"{A}/threads", f"{A}/threads/{thread}/messages"):
        response = client.post(url, content=body, headers=JSON)
        assert response.status_code == 400
        answer = response.json()
        assert answer["error"] == "invalid_request"
        assert answer["detail"].startswith(detail), answer
        assert "'data'" not in response.text


def test_an_invalid_grep_pattern_is_a_400(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    client.put(f"{A}/threads/{thread}/files/notes.txt", content=b"call (555) now")
    bad = client.get(f"{A}/threads/{thread}/grep", params={"pattern": "("})
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid_pattern"
    assert "'(' is not a valid regular expression" in bad.json()["detail"]
    escaped = client.get(f"{A}/threads/{thread}/grep", params={"pattern": r"\(555\)"})
    assert escaped.status_code == 200 and len(escaped.json()["results"]) == 1


def test_a_websocket_to_an_unknown_package_closes_with_4404(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    url = f"/api/packages/alpah/threads/{thread}/ws"
    with client.websocket_connect(url) as ws, pytest.raises(WebSocketDisconnect) as caught:
        ws.receive_json(timeout=60)
    assert caught.value.code == 4404
    assert caught.value.detail == "No package 'alpah' is served here (did you mean 'alpha'?)."
    no_key = {"Authorization": ""}
    url = f"/api/packages/nope/threads/{thread}/ws"
    with (
        client.websocket_connect(url, headers=no_key) as ws,
        pytest.raises(WebSocketDisconnect) as caught,
    ):
        ws.receive_json(timeout=60)
    assert caught.value.code == 4401
    served = client.get(f"/api/packages/nope/threads/{thread}")
    assert served.status_code == 404 and "No package 'nope'" in served.json()["detail"]


def test_a_413_says_the_limit(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    response = client.put(f"{A}/threads/{thread}/files/big.bin", content=b"0" * 10_500_000)
    assert response.status_code == 413
    assert response.json() == {
        "error": "payload_too_large",
        "detail": "The request body is larger than the limit of 10,000,000 bytes (10 MB). Send "
        "less, or raise the limit with Litestar's request_max_body_size when you build the app.",
    }


def test_options_allow_lists_every_method_of_the_path(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    cases = {
        f"{A}/threads/{thread}/messages": "GET, OPTIONS, POST",
        f"{A}/threads": "GET, OPTIONS, POST",
        f"{A}/threads/{thread}": "DELETE, GET, OPTIONS",
        f"{A}/threads/{thread}/files/a.txt": "DELETE, GET, OPTIONS, PUT",
    }
    for url, allow in cases.items():
        response = client.options(url)
        assert response.status_code == 204, url
        assert response.headers["allow"] == allow, url


def test_silent_must_be_a_boolean(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    for value in (0, 1, "true"):
        response = client.post(
            f"{A}/threads/{thread}/messages", json={"content": "x", "silent": value}
        )
        assert response.status_code == 400, value
        assert "at `$.silent`" in response.json()["detail"]
    ok = client.post(f"{A}/threads/{thread}/messages", json={"content": "x", "silent": True})
    assert ok.status_code == 202 and ok.json()["message"]["silent"] is True


def test_a_file_put_without_a_body_is_rejected(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    response = client.put(f"{A}/threads/{thread}/files/empty.txt", content=b"")
    assert response.status_code == 400
    assert response.json()["error"] == "empty_body"
    assert client.get(f"{A}/threads/{thread}/files/empty.txt").status_code == 404


def test_stop_on_a_terminated_thread_is_409(client: TestClient[Any]) -> None:
    thread = new_thread(client)
    assert client.post(f"{A}/threads/{thread}/stop").status_code == 200
    assert client.post(f"{A}/threads/{thread}/terminate").status_code == 200
    response = client.post(f"{A}/threads/{thread}/stop")
    assert response.status_code == 409
    assert response.json()["error"] == "thread_terminated"
