"""``GET /health``: readiness without a key, 503 until the runtime runs and while the database
is unreachable (naming nothing secret)."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import psql
from litestar import Litestar
from litestar.testing import TestClient
from pgcluster import Cluster
from test_server_packs import alpha_pack, provider

from sa_core import Runtime
from sa_core.server import StandardAgentsPlugin, create_app
from sa_core.server.health import readiness


def runtime_on(database_url: str) -> Runtime:
    return Runtime(
        packs=[alpha_pack()],
        providers={"test": provider()},
        database_url=database_url,
        load_entrypoints=False,
    )


def test_health_answers_ok_without_a_key_once_the_runtime_runs(
    sa_database_url: str, backend: str
) -> None:
    with TestClient(create_app(runtime_on(sa_database_url))) as client:
        response = client.get("/health")
        assert response.status_code == 200
        assert response.json() == {"status": "ok", "database": backend}
        assert response.headers["cache-control"] == "no-store"
        assert client.get("/api/packages").status_code == 401  # the API still needs its key
        schema = client.get("/schema/openapi.json").json()
        assert "security" not in schema["paths"]["/health"]["get"]


def test_health_answers_503_before_the_runtime_starts_and_once_it_closes(
    sa_database_url: str,
) -> None:
    runtime = runtime_on(sa_database_url)
    assert asyncio.run(readiness(runtime)) == (
        503,
        {"status": "unavailable", "detail": "The runtime is not started yet."},
    )
    with TestClient(create_app(runtime)) as client:
        assert client.get("/health").status_code == 200
        client.blocking_portal.call(runtime.close)
        closed = client.get("/health")
        assert closed.status_code == 503
        assert closed.json() == {"status": "unavailable", "detail": "The runtime is shutting down."}


def test_health_answers_503_while_postgresql_refuses_connections_and_200_again_after(
    pg_cluster: Cluster, pg_database_url: str
) -> None:
    database = pg_database_url.rsplit("/", 1)[1]
    with TestClient(create_app(runtime_on(pg_database_url))) as client:
        assert client.get("/health").status_code == 200
        psql(pg_cluster, f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS false")
        psql(
            pg_cluster,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()",
        )
        try:
            down = client.get("/health")
        finally:
            psql(pg_cluster, f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS true")
        assert down.status_code == 503
        body: dict[str, Any] = down.json()
        assert body["status"] == "unavailable"
        assert body["detail"].startswith("The database did not answer")
        for secret in (database, "127.0.0.1", str(pg_cluster.port), "sa:sa"):
            assert secret not in down.text
        # the connections opened before are all gone: the next probe opens a new one
        assert client.get("/health").json() == {"status": "ok", "database": "postgresql"}


def test_an_app_keeps_its_own_health_route_and_the_plugin_can_leave_it_out(
    sa_database_url: str,
) -> None:
    runtime = runtime_on(sa_database_url)
    app = Litestar(plugins=[StandardAgentsPlugin(runtime, health=False)])
    with TestClient(app) as client:
        assert client.get("/health").status_code == 404
