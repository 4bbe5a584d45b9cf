"""A remote turn continues its caller's trace on whichever worker runs it (PostgreSQL).

Server B runs as two ``sa serve`` workers on one PostgreSQL database, each writing its
finished spans to a file of its own (OpenTelemetry configured by the pack). The test is the
A2A client: its first message, sent to worker 1, starts a conversation whose turn runs there,
and worker 1 keeps the thread's lease. Its second message, with a W3C ``traceparent`` of a
new trace, goes to worker 2, which queues it for worker 1: the turn worker 1 runs must
continue worker 2's request span, in the caller's trace.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client")
pytest.importorskip("opentelemetry.sdk")

from serve_process import ServeProcess, offline_env  # noqa: E402
from test_remote_agents_traces import B_PACK, spans, until  # noqa: E402

from sa_core.store import open_store  # noqa: E402

AGENT = "/a2a/bdesk/writer"


class Workers:
    """Two workers of B on one database, with their span files."""

    def __init__(self, tmp: Path, db: str) -> None:
        (tmp / "b_pack.py").write_text(B_PACK)
        self.span_files = [tmp / "w1_spans.jsonl", tmp / "w2_spans.jsonl"]
        self.workers = [
            ServeProcess(
                tmp,
                db,
                "--pack",
                str(tmp / "b_pack.py"),
                "--test-provider",
                env=offline_env({"SPANS_FILE": str(path)}),
            )  # fmt: skip
            for path in self.span_files
        ]
        for worker in self.workers:
            worker.wait_ready()

        async def key() -> str:
            async with await open_store(db) as store:
                return (await store.create_api_key("tests"))[0]

        self.key = asyncio.run(key())

    def send(self, index: int, text: str, context_id: str, traceparent: str) -> dict[str, Any]:
        """``SendMessage`` to a worker (waiting for the task to end); the task."""
        message = {
            "messageId": os.urandom(8).hex(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **({"contextId": context_id} if context_id else {}),
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        headers = {
            "Authorization": f"Bearer {self.key}",
            "A2A-Version": "1.0",
            "traceparent": traceparent,
        }
        answer = httpx.post(self.workers[index].url + AGENT, json=body, headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        reply = answer.json()
        assert "result" in reply, reply
        return dict(reply["result"]["task"])

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


@pytest.fixture
def workers(tmp_path: Path, pg_database_url: str) -> Iterator[Workers]:
    started = Workers(tmp_path, pg_database_url)
    try:
        yield started
    finally:
        started.stop()


def traceparent() -> tuple[str, str]:
    """A new trace's ``traceparent`` (a sampled caller span), and the trace id."""
    trace_id = os.urandom(16).hex()
    return f"00-{trace_id}-{os.urandom(8).hex()}-01", trace_id


def shout(text: str) -> str:
    return "/tool shout " + json.dumps({"text": text})


def test_a_turn_queued_through_another_worker_continues_the_callers_trace(
    workers: Workers,
) -> None:
    first_parent, first_trace = traceparent()
    first = workers.send(0, shout("one"), "", first_parent)
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    second_parent, second_trace = traceparent()
    second = workers.send(1, shout("two"), first["contextId"], second_parent)
    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    w1, w2 = workers.span_files

    def turns(path: Path, trace_id: str) -> list[dict[str, Any]]:
        return [
            s for s in spans(path) if s["name"] == "invoke_agent writer" and s["trace"] == trace_id
        ]

    until(lambda: turns(w1, first_trace) or turns(w2, first_trace), "the first turn's span")
    [turn] = until(
        lambda: turns(w1, second_trace) or turns(w2, second_trace), "the second turn's span"
    )
    assert turns(w1, second_trace) == [turn]  # run by worker 1, which held the lease
    requests = {s["span"]: s for s in spans(w2) if s["trace"] == second_trace}
    assert turn["parent"] in requests  # under worker 2's request span: the caller's trace
    assert any(s["kind"] == "SERVER" and s["name"] == f"POST {AGENT}" for s in requests.values())
    assert not turns(w2, second_trace)
