"""Paths under /v1 this server does not serve answer 404 in OpenAI's shape, naming the path."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from openai_serve import Served


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp_path = tmp_path_factory.mktemp("unrouted")
    server = Served(tmp_path, f"sqlite:///{tmp_path / 'sa.db'}").start()
    try:
        yield server
    finally:
        server.stop()


def test_the_openai_client_gets_not_found_naming_the_path(served: Served) -> None:
    client = openai.OpenAI(base_url=served.base_url, api_key=served.key, max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model="reminders/reminder_assistant", input="hello")
    message = str(caught.value)
    assert "Invalid URL (POST /v1/embeddings)" in message
    assert "POST /v1/chat/completions" in message and "GET /v1/models" in message
    assert caught.value.code == "not_found"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/files"),
        ("POST", "/v1/completions"),
        ("GET", "/v1/embeddings/anything/deeper"),
        ("DELETE", "/v1/models"),
        ("GET", "/v1"),
    ],
)
def test_every_unserved_method_and_path_is_a_404_in_openais_shape(
    served: Served, method: str, path: str
) -> None:
    # No key either: an unserved path is unserved for everyone.
    response = httpx.request(method, served.url + path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["code"] == "not_found"
    assert f"Invalid URL ({method} {path})" in error["message"]


def test_paths_outside_v1_keep_the_apis_own_shape(served: Served) -> None:
    response = httpx.get(served.url + "/v1x/models")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
