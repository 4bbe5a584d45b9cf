"""The thread WebSocket through Litestar's test client: deltas, tool and child events, refusals."""

from __future__ import annotations

from typing import Any

import pytest
from api_kit import A, Api, B, api_on_test_packs
from litestar.exceptions import WebSocketDisconnect
from test_server_packs import REASONING, REPLY

api = api_on_test_packs()


# -- WebSocket -------------------------------------------------------------------------------


def _frames_until(ws: Any, done: Any, limit: int = 500) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    for _ in range(limit):
        frame = ws.receive_json(timeout=60)
        frames.append(frame)
        if done(frame):
            return frames
    raise AssertionError(f"no final frame in {limit} frames: {frames[-5:]}")


def _final_reply(frame: dict[str, Any]) -> bool:
    data = frame.get("data") or {}
    return (
        frame["type"] == "message_data"
        and not frame.get("subagent_id")
        and data.get("role") == "assistant"
        and data.get("status") == "completed"
        and bool(data.get("content"))
    )


def test_websocket_streams_deltas_tool_events_and_child_events(api: Api) -> None:
    thread_id = api.thread()
    url = f"{A}/threads/{thread_id}/ws"
    with api.client.websocket_connect(url, headers={"Authorization": f"Bearer {api.token}"}) as ws:
        assert ws.receive_json(timeout=60) == {"type": "connected", "thread_id": thread_id}
        ws.send_text("ping")
        assert ws.receive_text(timeout=60) == "pong"
        api.client.post(f"{A}/threads/{thread_id}/messages", json={"content": "Hi"})
        frames = _frames_until(ws, _final_reply)
        chunks = [f["chunk"] for f in frames if f["type"] == "message_chunk"]
        assert len(chunks) > 1 and "".join(chunks) == REPLY
        reasoning = [f["chunk"] for f in frames if f["type"] == "reasoning_chunk"]
        assert "".join(reasoning) == REASONING
        api.client.post(f"{A}/threads/{thread_id}/messages", json={"content": "weather?"})
        frames = _frames_until(ws, _final_reply)
        events = [(f["eventType"], f["data"]) for f in frames if f["type"] == "event"]
        names = [name for name, _ in events]
        assert names.index("tool_call_started") < names.index("weather_checked")
        assert names.index("weather_checked") < names.index("tool_call_done")
        assert ("weather_checked", {"city": "Oslo"}) in events
        api.client.post(f"{A}/threads/{thread_id}/messages", json={"content": "summarize"})
        frames = _frames_until(ws, _final_reply)
    child_frames = [f for f in frames if f.get("subagent_id")]
    assert child_frames, "no child-thread frames"
    child = api.client.get(f"{A}/threads/{thread_id}/children").json()["children"][0]
    assert {f["subagent_id"] for f in child_frames} == {child["reference"]}
    assert any(f["type"] == "event" and f["eventType"] == "tool_call_done" for f in child_frames)


def test_websocket_refuses_other_packages_and_missing_keys(api: Api) -> None:
    thread_id = api.thread()
    codes = []
    for url, headers in [
        (f"{B}/threads/{thread_id}/ws", {"Authorization": f"Bearer {api.token}"}),
        (f"{A}/threads/{thread_id}/ws", {"Authorization": ""}),
    ]:
        with api.client.websocket_connect(url, headers=headers) as ws:
            with pytest.raises(WebSocketDisconnect) as caught:
                ws.receive_json(timeout=60)
            codes.append(caught.value.code)
    assert codes == [4404, 4401]
    query = f"{A}/threads/{thread_id}/ws?access_token={api.token}"
    with api.client.websocket_connect(query, headers={"Authorization": ""}) as ws:
        assert ws.receive_json(timeout=60)["type"] == "connected"
