"""One trace across two ``sa serve`` processes: W3C trace context over A2A.

Each server's pack configures OpenTelemetry the usual way (a global tracer provider) with an
exporter writing each finished span as a JSON line to a file of its own. Server A's ``boss``
calls B's ``writer`` as the blocking remote agent ``researcher``; the test reads both files.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client")
pytest.importorskip("opentelemetry.sdk")

from serve_process import ServeProcess, offline_env  # noqa: E402

TRACING = """
import json, os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

class FileExporter(SpanExporter):
    def export(self, spans):
        with open(os.environ["SPANS_FILE"], "a") as out:
            for span in spans:
                parent = span.parent
                out.write(json.dumps({
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace": format(span.context.trace_id, "032x"),
                    "span": format(span.context.span_id, "016x"),
                    "parent": format(parent.span_id, "016x") if parent else None,
                    "attributes": {k: v for k, v in (span.attributes or {}).items()
                                   if isinstance(v, (str, int, float, bool))},
                }) + "\\n")
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
trace.set_tracer_provider(provider)
"""
B_PACK = (
    TRACING
    + """
from pydantic import BaseModel
from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

class Text(BaseModel):
    text: str

pack = Pack(
    name="bdesk",
    agents=[define_agent(name="writer", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="You write.", include_chat=True,
                           tools=["shout"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    tools=[define_tool(name="shout", description="Shouts.", args=Text,
                       execute=lambda state, args: args.text.upper())],
)
"""
)
A_PACK = (
    TRACING
    + """
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent

pack = Pack(
    name="adesk",
    agents=[define_agent(name="boss", side_a={"prompt": "boss_main"},
                         variables=[{"name": "B_KEY", "type": "secret"}])],
    prompts=[define_prompt(name="boss_main", model="m", prompt="Boss.", include_chat=True,
                           tools=[{"name": "researcher", "blocking": True}])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=[define_remote_agent(name="researcher", url=os.environ["B_CARD"],
                                       headers={"Authorization": "Bearer ${B_KEY}"})],
)
"""
)


def until(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, Any]]:
    (tmp_path / "b_pack.py").write_text(B_PACK)
    (tmp_path / "a_pack.py").write_text(A_PACK)
    b_spans, a_spans = tmp_path / "b_spans.jsonl", tmp_path / "a_spans.jsonl"
    b = ServeProcess(
        tmp_path, f"sqlite:///{tmp_path / 'b.db'}", "--pack", str(tmp_path / "b_pack.py"),
        "--test-provider", env=offline_env({"SPANS_FILE": str(b_spans)}),
    )  # fmt: skip
    started = [b]
    try:
        b.wait_line("Try it")
        b_key = b.printed_key()
        assert b_key, b.output()
        env = {
            "SPANS_FILE": str(a_spans),
            "B_CARD": f"{b.url}/a2a/bdesk/writer/.well-known/agent-card.json",
            "B_KEY": b_key,
        }
        a = ServeProcess(
            tmp_path, f"sqlite:///{tmp_path / 'a.db'}", "--pack", str(tmp_path / "a_pack.py"),
            "--test-provider", env=offline_env(env),
        )  # fmt: skip
        started.append(a)
        a.wait_line("Try it")
        a_key = a.printed_key()
        assert a_key, a.output()
        yield {"a": a, "a_key": a_key, "a_spans": a_spans, "b_spans": b_spans}
    finally:
        for server in started:
            server.stop()


def test_a_remote_call_and_the_remote_turn_share_one_trace(servers: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {servers['a_key']}"}
    with httpx.Client(base_url=servers["a"].url, headers=headers, timeout=30) as a:
        api = "/api/packages/adesk"
        boss = a.post(f"{api}/threads", json={"agent": "boss"}).json()["id"]
        message = "/tool shout " + json.dumps({"text": "traced"})
        call = "/tool researcher " + json.dumps({"message": message})
        assert a.post(f"{api}/threads/{boss}/messages", json={"content": call}).status_code == 202
        until(lambda: not a.get(f"{api}/threads/{boss}").json()["running"], "A's turn to end")
    [client] = until(
        lambda: [s for s in spans(servers["a_spans"]) if s["name"] == "invoke_agent researcher"],
        "A's remote call span",
    )
    trace_id = client["trace"]
    remote_turn = until(
        lambda: [
            s
            for s in spans(servers["b_spans"])
            if s["name"] == "invoke_agent writer" and s["trace"] == trace_id
        ],
        "B's turn in A's trace",
    )
    a_spans, b_spans = spans(servers["a_spans"]), spans(servers["b_spans"])
    assert client["kind"] == "CLIENT"
    assert client["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert client["attributes"]["a2a.state"] == "completed"
    # the child's turn on A holds the call; it is linked, not joined, to the boss's trace
    [child_turn] = [s for s in a_spans if s["name"] == "subagent_run researcher"]
    assert (client["parent"], client["trace"]) == (child_turn["span"], child_turn["trace"])
    # B's request spans continue A's call span; B's turn and its steps are in that trace
    requests = [s for s in b_spans if s["parent"] == client["span"]]
    assert requests and {(s["name"], s["kind"]) for s in requests} == {
        ("POST /a2a/bdesk/writer", "SERVER")
    }
    in_trace = {s["span"]: s for s in b_spans if s["trace"] == trace_id}
    [turn] = remote_turn
    assert turn["parent"] in in_trace  # under B's request span (or the SDK's under it)
    b_names = {s["name"] for s in in_trace.values()}
    assert {"execute_tool shout", "chat offline:gpt-4o-mini"} <= b_names
    assert turn["attributes"]["sa.package"] == "bdesk"
