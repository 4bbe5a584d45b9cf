"""Schemathesis against the live OpenAPI schema: no 5xx, no response outside the schema.

The server runs on 127.0.0.1 in a background thread. Every operation except the two streaming
routes is exercised with generated data; the thread routes of each package get a real thread of
that package as ``thread_id``, so the generated calls reach real threads, files and messages.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from test_server_packs import alpha_pack, beta_pack, provider

from sa_core import Runtime
from sa_core.server import create_app
from sa_core.server.testing import serve_in_thread
from sa_core.store import open_store

MAX_EXAMPLES = 10
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    ignored_auth,
]


async def _create_key(database_url: str) -> str:
    store = await open_store(database_url)
    try:
        token, _ = await store.create_api_key("schemathesis")
    finally:
        await store.close()
    return token


@pytest.fixture(scope="module")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    database_url = f"sqlite:///{tmp_path_factory.mktemp('schemathesis') / 'sa.db'}"
    token = asyncio.run(_create_key(database_url))
    runtime = Runtime(
        packs=[alpha_pack(), beta_pack()],
        providers={"test": provider(chunk_size=None)},
        database_url=database_url,
        load_entrypoints=False,
    )
    with serve_in_thread(create_app(runtime)) as base_url:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=10) as client:
            threads = {}
            for package, env in (("alpha", {}), ("beta", {"BETA_KEY": "b"})):
                base = f"/api/packages/{package}/threads"
                created = client.post(base, json={"agent": "helper", "env": env}).json()
                threads[package] = created["id"]
                client.post(f"{base}/{created['id']}/messages", json={"content": "Hi"})
                client.put(f"{base}/{created['id']}/files/notes/a.txt", content=b"needle")
        yield {"url": base_url, "token": token, "threads": threads}


def _operations(
    live_api: dict[str, Any],
) -> Iterator[tuple[Any, dict[str, str] | None, int]]:
    """Yield (operation, fixed path parameters, examples) runs.

    Thread routes run with a real thread of their package, so generated calls reach real
    messages and files; alpha's also run with generated thread ids.
    """
    schema = schemathesis.openapi.from_url(f"{live_api['url']}/schema/openapi.json")
    schema = schema.exclude(path_regex=r"/threads/\{thread_id\}/(stream|ws)$")
    for result in schema.get_all_operations():
        operation = result.ok()
        match = re.match(r"^/api/packages/(\w+)/threads/\{thread_id\}", operation.path)
        if match is None:
            yield operation, None, MAX_EXAMPLES
            continue
        if match.group(1) == "alpha":
            yield operation, None, 3  # unknown ids: 404s (beta's routes are the same code)
        if "{thread_id}/terminate" not in operation.path:
            yield operation, {"thread_id": live_api["threads"][match.group(1)]}, MAX_EXAMPLES


def _valid_body(operation: Any) -> st.SearchStrategy[dict[str, Any]] | None:
    """Bodies that create threads (random ones almost never name a real agent)."""
    if operation.method != "post" or not operation.path.endswith("/threads"):
        return None
    names = st.text(max_size=12)
    env = st.dictionaries(names, st.text(max_size=12), max_size=3)
    if "/beta/" in operation.path:
        env = env.map(lambda values: {**values, "BETA_KEY": "b"})
    return st.fixed_dictionaries(
        {"agent": st.just("helper"), "env": env},
        optional={
            "tags": st.lists(st.text(max_size=20), max_size=4),
            "env_types": st.dictionaries(names, st.sampled_from(["text", "secret"]), max_size=2),
        },
    )


def _check(
    operation: Any, path_parameters: dict[str, str] | None, examples: int, token: str
) -> None:
    """Run one operation's generated cases against the live server."""
    body = _valid_body(operation)

    @given(data=st.data())
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def call(data: st.DataObject) -> None:
        fixed = {} if body is None else {"body": data.draw(body)}
        case = data.draw(operation.as_strategy(path_parameters=path_parameters, **fixed))
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)

    call()


def test_api_conforms_to_its_schema(live_api: dict[str, Any]) -> None:
    failures: list[str] = []
    runs = 0
    for operation, path_parameters, examples in _operations(live_api):
        if (
            path_parameters
            and operation.method == "delete"
            and operation.path.endswith("{thread_id}")
        ):
            continue  # deleting the real thread would leave nothing for the operations after it
        runs += 1
        try:
            _check(operation, path_parameters, examples, live_api["token"])
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert runs > 40
    assert not failures, "\n\n".join(failures)
