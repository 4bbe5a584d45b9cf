"""The HTTP API through Litestar's test client, on the alpha and beta test packs.

A test module gets the ``api`` fixture with ``api = api_on_test_packs()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from litestar.testing import TestClient
from test_server_packs import alpha_pack, beta_pack, provider

from sa_core import Runtime
from sa_core.server import create_app

A = "/api/packages/alpha"
B = "/api/packages/beta"


@dataclass
class Api:
    client: TestClient[Any]
    runtime: Runtime
    token: str

    def call(self, fn: Any, *args: Any) -> Any:
        """Run a coroutine function in the app's event loop."""
        return self.client.blocking_portal.call(fn, *args)

    def idle(self) -> None:
        self.call(self.runtime.wait_idle, 10)

    def thread(self, package: str = "alpha", **body: Any) -> str:
        body.setdefault("agent", "helper")
        if package == "beta":
            body.setdefault("env", {"BETA_KEY": "beta-secret-value"})
        response = self.client.post(f"/api/packages/{package}/threads", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def say(self, thread_id: str, content: str, package: str = "alpha") -> dict[str, Any]:
        response = self.client.post(
            f"/api/packages/{package}/threads/{thread_id}/messages", json={"content": content}
        )
        assert response.status_code == 202, response.text
        self.idle()
        return dict(response.json())

    def messages(self, thread_id: str, **params: Any) -> list[dict[str, Any]]:
        response = self.client.get(f"{A}/threads/{thread_id}/messages", params=params)
        assert response.status_code == 200, response.text
        return list(response.json()["messages"])


def api_on_test_packs() -> Any:
    """The ``api`` fixture: the app on the alpha and beta packs, with a valid key set."""

    @pytest.fixture
    def api(sa_database_url: str) -> Iterator[Api]:
        runtime = Runtime(
            packs=[alpha_pack(), beta_pack()],
            providers={"test": provider()},
            database_url=sa_database_url,
            load_entrypoints=False,
        )
        with TestClient(create_app(runtime)) as client:
            token, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
            client.headers["Authorization"] = f"Bearer {token}"
            yield Api(client, runtime, token)

    return api
