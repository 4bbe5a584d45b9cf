"""``/api/packages/{package}/schedules``: list, create, get, pause, resume and delete over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from echo_agent import echo_pack, echo_provider
from litestar.testing import TestClient

from sa_core import Runtime, define_schedule
from sa_core.server import create_app
from sa_core.testing import ManualClock

S = "/api/packages/echo/schedules"
START = datetime(2030, 1, 4, 7, 59, 30, tzinfo=UTC)
MINUTE = 60_000_000


class Api:
    """A test client on the echo pack (with its pack schedule ``nightly``) and a manual clock."""

    def __init__(self, client: TestClient[Any], runtime: Runtime, clock: ManualClock) -> None:
        self.client = client
        self.runtime = runtime
        self.clock = clock

    def advance(self, **delta: float) -> None:
        """Move the clock and wait until the runs it made due have finished."""
        self.clock.advance(**delta)
        self.client.blocking_portal.call(self.runtime.wait_idle, 30)

    def runs(self, name: str) -> list[dict[str, Any]]:
        response = self.client.get("/api/packages/echo/threads", params={"tag": f"schedule:{name}"})
        assert response.status_code == 200, response.text
        return list(response.json()["threads"])


@pytest.fixture
def api(sa_database_url: str) -> Iterator[Api]:
    pack = echo_pack()
    pack.schedules = [
        define_schedule(name="nightly", agent="helper", cron="0 2 * * *", message="night")
    ]
    clock = ManualClock(START)
    runtime = Runtime(
        packs=[pack],
        providers={"test": echo_provider()},
        database_url=sa_database_url,
        load_entrypoints=False,
        clock=clock,
    )
    with TestClient(create_app(runtime)) as client:
        token, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {token}"
        yield Api(client, runtime, clock)


def test_create_list_get_pause_resume_and_delete_a_schedule(api: Api) -> None:
    body = {"name": "poll", "agent": "helper", "every": "1m", "message": "poll now"}
    created = api.client.post(S, json=body)
    assert created.status_code == 201, created.text
    poll = created.json()
    assert poll["package"] == "echo"
    assert (poll["status"], poll["source"], poll["thread"], poll["timezone"]) == (
        "active",
        "api",
        "new",
        "UTC",
    )
    assert poll["next_run_at"] == int(START.timestamp() * 1e6) + MINUTE
    listed = api.client.get(S).json()["schedules"]
    assert [(s["name"], s["source"]) for s in listed] == [("nightly", "pack"), ("poll", "api")]

    api.advance(minutes=1)
    (run,) = api.runs("poll")
    assert run["tags"] == ["schedule:poll"]
    messages = api.client.get(f"/api/packages/echo/threads/{run['id']}/messages").json()
    assert [m["content"] for m in messages["messages"]] == ["poll now", "echo: poll now"]
    got = api.client.get(f"{S}/poll").json()
    assert (got["runs"], got["last_thread_id"]) == (1, run["id"])

    paused = api.client.post(f"{S}/poll/pause")
    assert paused.status_code == 200
    assert paused.json()["status"] == "paused"
    api.advance(minutes=3)
    assert len(api.runs("poll")) == 1
    resumed = api.client.post(f"{S}/poll/resume")
    assert resumed.status_code == 200
    assert resumed.json()["status"] == "active"
    assert resumed.json()["next_run_at"] == api.clock.now_us() + MINUTE
    api.advance(minutes=1)
    assert len(api.runs("poll")) == 2

    deleted = api.client.delete(f"{S}/poll")
    assert deleted.status_code == 204
    assert api.client.get(f"{S}/poll").status_code == 404
    assert [s["name"] for s in api.client.get(S).json()["schedules"]] == ["nightly"]
    api.advance(minutes=2)
    assert len(api.runs("poll")) == 2  # its threads stay; it starts no more


def test_a_bad_cron_expression_is_a_422_naming_the_schedule_and_listing_every_problem(
    api: Api,
) -> None:
    body = {
        "name": "digest",
        "agent": "helper",
        "cron": "0 25 * * *",
        "timezone": "Nowhere/City",
        "message": "go",
    }
    response = api.client.post(S, json=body)
    assert response.status_code == 422
    error = response.json()
    assert error["error"] == "invalid_schedule"
    assert error["detail"].startswith("Schedule 'digest' has 2 problem(s)")
    problems = [e["message"] for e in error["errors"]]
    assert problems[0].startswith("cron '0 25 * * *' is not a valid cron expression (Bad hour)")
    assert problems[1].startswith("timezone 'Nowhere/City' is not a known IANA time zone")
    both = api.client.post(S, json={**body, "cron": "* * * * *", "every": "soon"})
    assert both.status_code == 422
    assert "give exactly one of cron" in both.json()["detail"]
    assert api.client.get(S).json()["schedules"][0]["name"] == "nightly"  # nothing was stored


def test_unknown_schedules_agents_and_taken_names_answer_404_422_and_409(api: Api) -> None:
    for method, url in [
        ("GET", f"{S}/nope"),
        ("POST", f"{S}/nope/pause"),
        ("POST", f"{S}/nope/resume"),
        ("DELETE", f"{S}/nope"),
    ]:
        response = api.client.request(method, url)
        assert response.status_code == 404, (method, url)
        assert response.json()["error"] == "schedule_not_found"
        assert "no schedule 'nope'" in response.json()["detail"]
    stranger = {"name": "x", "agent": "nobody", "every": "1h", "message": "m"}
    unknown = api.client.post(S, json=stranger)
    assert unknown.status_code == 422
    assert unknown.json()["error"] == "unknown_agent"
    taken = api.client.post(S, json={**stranger, "name": "nightly", "agent": "helper"})
    assert taken.status_code == 409
    assert taken.json()["error"] == "schedule_exists"
    assert api.client.get("/api/packages/nopack/schedules").status_code == 404


def test_schedule_routes_need_a_key_and_are_in_the_openapi_schema(api: Api) -> None:
    bare = {"Authorization": ""}
    for method, url in [
        ("GET", S),
        ("POST", S),
        ("GET", f"{S}/nightly"),
        ("POST", f"{S}/nightly/pause"),
        ("POST", f"{S}/nightly/resume"),
        ("DELETE", f"{S}/nightly"),
    ]:
        assert api.client.request(method, url, headers=bare).status_code == 401, (method, url)
    assert api.client.get(f"{S}/nightly").json()["status"] == "active"  # untouched
    paths = api.client.get("/schema/openapi.json").json()["paths"]
    assert set(paths[S]) == {"get", "post"}
    assert set(paths[f"{S}/{{name}}"]) == {"get", "delete"}
    assert set(paths[f"{S}/{{name}}/pause"]) == {"post"}
    assert set(paths[f"{S}/{{name}}/resume"]) == {"post"}
