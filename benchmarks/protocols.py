"""The OpenAI-compatible API against the messages API on one pack: turns/s and first token.

Run: ``python benchmarks/protocols.py [--short]``. Starts ``sa serve --test-provider`` (one
worker, a fresh SQLite file, the pack of ``server.py``) on a loopback port, pinned to one core
as ``server.py`` does, and drives it with the same minimal keep-alive HTTP/1.1 client. Each of
20 simulated users holds one conversation, one turn at a time:

- **messages API**: the user's thread has its server-sent-event stream open; a turn is
  ``POST .../messages`` and ends with the stored answer on the stream;
- **/v1/chat/completions**: a turn is one streamed chat completion carrying the whole
  conversation so far (as OpenAI clients send it), so the server finds the thread by the
  conversation's digest; it ends with ``data: [DONE]``.

First token: from sending the request to the first frame (chunk) carrying answer text. One run
of each, printed as one table.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import parse_args, percentile  # noqa: E402
from server import PACKAGE, Connection, Served, Stream, answered  # noqa: E402

MODEL = f"{PACKAGE}/chatter"
USERS = 20


def first_text(frame: dict[str, Any]) -> bool:
    """Whether a stream frame carries answer text (a delta, or the stored answer)."""
    return frame.get("type") == "message_chunk" or answered(frame)


async def messages_user(port: int, key: str, stop: list[float], out: dict[str, list[float]]) -> int:
    """One user of the messages API until ``stop[0]``; the turns it made."""
    api = await Connection(port, key).open()
    status, thread = await api.request(
        "POST", f"/api/packages/{PACKAGE}/threads", {"agent": "chatter"}
    )
    assert status == 201, thread
    stream = Stream(await Connection(port, key).open())
    await stream.open(thread["id"])
    path = f"/api/packages/{PACKAGE}/threads/{thread['id']}/messages"
    turns = 0
    try:
        while time.perf_counter() < stop[0]:
            start = time.perf_counter()
            api.send("POST", path, {"content": f"message {turns}"})
            first: float | None = None
            while True:
                frame = await stream.frame()
                if first is None and first_text(frame):
                    first = time.perf_counter() - start
                if answered(frame):
                    break
            status, headers = await api.head()
            assert status == 202, status
            await api.reader.readexactly(int(headers.get("content-length", "0")))
            out["first"].append((first or 0.0) * 1000)
            turns += 1
    finally:
        api.close()
        stream.connection.close()
    return turns


async def chat_user(port: int, key: str, stop: list[float], out: dict[str, list[float]]) -> int:
    """One user of ``/v1/chat/completions`` until ``stop[0]``; the turns it made."""
    api = await Connection(port, key).open()
    messages: list[dict[str, str]] = []
    turns = 0
    try:
        while time.perf_counter() < stop[0]:
            messages.append({"role": "user", "content": f"message {turns}"})
            start = time.perf_counter()
            body = {"model": MODEL, "messages": messages, "stream": True}
            api.send("POST", "/v1/chat/completions", body)
            status, _ = await api.head()
            assert status == 200, status
            first: float | None = None
            text, buffer, done = [], b"", False
            while not done:
                chunk = await api.chunk()
                assert chunk, "the stream ended before [DONE]"
                buffer += chunk
                *events, buffer = re.split(rb"\n\n", buffer)
                for event in events:
                    data = event.removeprefix(b"data: ")
                    if data == b"[DONE]":
                        done = True
                        break
                    choices = json.loads(data)["choices"]
                    content = choices[0]["delta"].get("content") if choices else None
                    if content:
                        if first is None:
                            first = time.perf_counter() - start
                        text.append(content)
            assert await api.chunk() == b""  # the chunked body's last (empty) chunk
            messages.append({"role": "assistant", "content": "".join(text)})
            out["first"].append((first or 0.0) * 1000)
            turns += 1
    finally:
        api.close()
    return turns


async def run(user: Any, port: int, key: str, seconds: float) -> dict[str, Any]:
    """``USERS`` concurrent users of one kind for ``seconds``; turns/s and first-token times."""
    out: dict[str, list[float]] = {"first": []}
    stop = [time.perf_counter() + seconds]
    start = time.perf_counter()
    counts = await asyncio.gather(*(user(port, key, stop, out) for _ in range(USERS)))
    elapsed = time.perf_counter() - start
    return {"turns": sum(counts), "turns_per_s": sum(counts) / elapsed, "first": out["first"]}


def main() -> None:
    """Print one table: turns/s and first-token p50/p99 of both APIs."""
    args = parse_args(__doc__ or "")
    seconds = 4.0 if args.short else 20.0
    with tempfile.TemporaryDirectory() as tmp:
        served = Served(Path(tmp) / "server.db").start()
        try:
            port, key = served.port, served.key
            results = {
                "messages API + SSE stream": asyncio.run(run(messages_user, port, key, seconds)),
                "/v1/chat/completions (stream)": asyncio.run(run(chat_user, port, key, seconds)),
            }
        finally:
            served.stop()
    print(f"sa serve --test-provider, one worker, SQLite, {USERS} concurrent conversations, "
          f"{seconds:.0f} s each ({served.pinned}):")
    print()
    print("| API | turns | turns/s | first token p50 | first token p99 |")
    print("|---|---:|---:|---:|---:|")
    for name, result in results.items():
        firsts = result["first"]
        print(f"| {name} | {result['turns']} | {result['turns_per_s']:.0f} | "
              f"{statistics.median(firsts):.2f} ms | {percentile(firsts, 0.99):.2f} ms |")


if __name__ == "__main__":
    main()
