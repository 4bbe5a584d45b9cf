"""Bad input at the edges: bodies that are not UTF-8, and file names or paths that are too long."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient
from test_server_packs import alpha_pack, provider

from sa_core import Runtime
from sa_core.errors import FileSystemError
from sa_core.server.testing import signed_in_client
from sa_core.store.paths import MAX_NAME_BYTES, MAX_PATH_BYTES

A = "/api/packages/alpha"


@pytest.fixture
def client(sa_database_url: str) -> Iterator[TestClient[Any]]:
    runtime = Runtime(
        packs=[alpha_pack()],
        providers={"test": provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with signed_in_client(runtime) as test_client:
        yield test_client


def _thread(client: TestClient[Any]) -> str:
    response = client.post(f"{A}/threads", json={"agent": "helper"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


JSON = {"content-type": "application/json"}


def test_a_json_body_that_is_not_utf8_is_a_400_naming_the_byte(client: TestClient[Any]) -> None:
    response = client.post(f"{A}/threads", content=b'{"agent": "hel\xff\xfeper"}', headers=JSON)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert "not valid UTF-8 (it holds the byte 0xff)" in response.json()["detail"]
    thread_id = _thread(client)
    response = client.post(
        f"{A}/threads/{thread_id}/messages", content=b'{"content": "\xc3\x28"}', headers=JSON
    )
    assert response.status_code == 400 and "UTF-8" in response.json()["detail"]
    assert client.get(f"{A}/threads/{thread_id}/messages").json()["messages"] == []


def test_file_names_longer_than_the_limit_are_refused_over_http(client: TestClient[Any]) -> None:
    thread_id = _thread(client)
    files = f"{A}/threads/{thread_id}/files"
    longest = "n" * MAX_NAME_BYTES
    assert client.put(f"{files}/notes/{longest}", content=b"x").status_code == 201
    response = client.put(f"{files}/notes/{longest}x", content=b"x")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_path"
    assert f"at most {MAX_NAME_BYTES} bytes" in response.json()["detail"]
    wide = "é" * (MAX_NAME_BYTES // 2 + 1)  # fewer characters than the limit, more bytes
    assert client.put(f"{files}/{wide}", content=b"x").status_code == 400
    deep = "/".join(["d" * 200] * 21)  # every name short, the path over the limit
    response = client.put(f"{files}/{deep}", content=b"x")
    assert (
        response.status_code == 400
        and f"at most {MAX_PATH_BYTES} bytes" in response.json()["detail"]
    )
    assert client.get(f"{files}/{'z' * 10_000}").status_code == 400


@pytest.mark.asyncio
async def test_thread_state_file_ops_refuse_overlong_names(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[alpha_pack()], providers={"test": provider()}) as rt:
        thread = await rt.create_thread("helper")
        with pytest.raises(FileSystemError, match=f"at most {MAX_PATH_BYTES} bytes"):
            await thread.write_file("/" + "a" * 100_000, "text")
        with pytest.raises(FileSystemError, match=f"at most {MAX_NAME_BYTES} bytes"):
            await thread.write_file("/" + "a" * 4000, "text")
        with pytest.raises(FileSystemError, match=f"at most {MAX_NAME_BYTES} bytes"):
            await thread.mkdir_file("/" + "b" * 256)
        with pytest.raises(FileSystemError, match=f"at most {MAX_PATH_BYTES} bytes"):
            await thread.write_file("/".join(["c" * 250] * 20), "text")
        record = await thread.write_file("/ok/" + "a" * MAX_NAME_BYTES, "text")
        assert record.name == "a" * MAX_NAME_BYTES
        with pytest.raises(FileSystemError, match="Use a shorter name"):
            await thread.stat_file("/" + "a" * 300)
