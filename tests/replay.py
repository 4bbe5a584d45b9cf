"""Replay recorded provider traffic (go-vcr v2 cassettes) through ``httpx.MockTransport``.

A :class:`Replay` serves a cassette's recorded responses in order, checking that each request
has the recorded method and path, and keeps what the provider sent so that tests can compare our
request bodies with the recorded ones (:func:`assert_same_requests`). :func:`run_conversation`
drives a provider through a recorded tool-call round trip: it answers every tool call with the
scenario's canned result and sends the next request, as the recording's client did.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import yaml

from sa_core.providers import (
    Provider,
    ProviderImage,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderTool,
    collect_stream,
)

FIXTURES = Path(__file__).parent / "fixtures" / "provider_traffic"

WEATHER = ProviderTool(
    "weather",
    "Get weather information for a location",
    {
        "properties": {"location": {"description": "the city", "type": "string"}},
        "required": ["location"],
        "type": "object",
    },
)
_NUMBERS = {
    "properties": {
        "a": {"description": "first number", "type": "integer"},
        "b": {"description": "second number", "type": "integer"},
    },
    "required": ["a", "b"],
    "type": "object",
}
ADD = ProviderTool("add", "Add two numbers", _NUMBERS)
MULTIPLY = ProviderTool("multiply", "Multiply two numbers", _NUMBERS)
TOOL_RESULTS = {"weather": "40 C", "add": "5", "multiply": "6"}
"""What the recorded client answered to each tool."""


@dataclass(frozen=True)
class Interaction:
    """One recorded request and its response."""

    method: str
    url: str
    request_body: str
    status: int
    content_type: str
    body: str

    @property
    def path(self) -> str:
        """The request path, without the query."""
        return httpx.URL(self.url).path

    @property
    def is_sse(self) -> bool:
        """Whether the recorded response is a server-sent-event stream."""
        return not self.body.lstrip().startswith("{")

    def recorded_request(self) -> dict[str, Any]:
        """The recorded request body, decoded."""
        value: dict[str, Any] = json.loads(self.request_body)
        return value


@dataclass(frozen=True)
class Cassette:
    """A go-vcr v2 recording."""

    path: Path
    interactions: tuple[Interaction, ...]

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read a cassette file (a path relative to the fixtures folder works too)."""
        file = Path(path)
        if not file.is_absolute() and not file.exists():
            file = FIXTURES / file
        data = yaml.safe_load(file.read_text())
        interactions = []
        for item in data["interactions"]:
            request, response = item["request"], item["response"]
            headers = response.get("headers") or {}
            content_type = (headers.get("Content-Type") or ["application/json"])[0]
            interactions.append(
                Interaction(
                    method=request["method"],
                    url=request["url"],
                    request_body=request.get("body") or "",
                    status=int(response["code"]),
                    content_type=content_type,
                    body=response.get("body") or "",
                )
            )
        return cls(file, tuple(interactions))


@dataclass
class Replay:
    """An ``httpx.MockTransport`` that plays a cassette back, in order."""

    cassette: Cassette
    match_path: bool = True
    sent: list[httpx.Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        index = len(self.sent)
        if index >= len(self.cassette.interactions):
            raise AssertionError(f"unexpected request #{index + 1} to {request.url}")
        recorded = self.cassette.interactions[index]
        assert request.method == recorded.method, (request.method, recorded.method)
        if self.match_path:
            assert request.url.path == recorded.path, (request.url.path, recorded.path)
        self.sent.append(request)
        return httpx.Response(
            recorded.status,
            headers={"content-type": recorded.content_type},
            content=recorded.body.encode(),
        )

    @property
    def sent_bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies the provider sent."""
        return [json.loads(request.content) for request in self.sent]

    @property
    def recorded_bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies the recording's client sent."""
        return [i.recorded_request() for i in self.cassette.interactions]

    @property
    def exhausted(self) -> bool:
        """Whether every recorded interaction was served."""
        return len(self.sent) == len(self.cassette.interactions)


_ID_KEYS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id"})


def canonical(value: Any, ids: dict[str, str] | None = None) -> Any:
    """Normalise a request body for comparison.

    JSON-string ``arguments`` are decoded (spacing differs between clients) and tool-call ids
    are replaced by their order of appearance (clients may generate their own).
    """
    ids = {} if ids is None else ids
    if isinstance(value, list):
        return [canonical(item, ids) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "arguments" and isinstance(item, str):
            out[key] = json.loads(item)
        elif key in _ID_KEYS and isinstance(item, str):
            out[key] = ids.setdefault(item, f"<id{len(ids)}>")
        else:
            out[key] = canonical(item, ids)
    return out


def assert_same_requests(replay: Replay, *, ignore: Iterable[str] = ()) -> None:
    """Assert that every body we sent equals the recorded one (after :func:`canonical`)."""
    skip = set(ignore)
    for index, (sent, recorded) in enumerate(
        zip(replay.sent_bodies, replay.recorded_bodies, strict=False)
    ):
        ours = canonical({k: v for k, v in sent.items() if k not in skip})
        theirs = canonical({k: v for k, v in recorded.items() if k not in skip})
        assert ours == theirs, f"request #{index + 1} differs from {replay.cassette.path}"


# ---------------------------------------------------------------------------------------------
# Building the recorded conversation's first request
# ---------------------------------------------------------------------------------------------


def _texts(body: dict[str, Any]) -> tuple[str | None, str]:
    """The system prompt and first user text of a recorded body, for any wire protocol."""
    if "contents" in body:
        system = body.get("systemInstruction", {}).get("parts", [{}])[0].get("text")
        return system, body["contents"][0]["parts"][0]["text"]
    if "input" in body:
        first = body["input"][0]
        return first["content"], body["input"][1]["content"][0]["text"]
    messages = body["messages"]
    if "system" in body:
        return body["system"][0]["text"], messages[0]["content"][0]["text"]
    user = messages[1]["content"]
    return messages[0]["content"], user if isinstance(user, str) else user[0]["text"]


def _images(body: dict[str, Any]) -> list[ProviderImage]:
    text = json.dumps(body)
    found = re.findall(r"data:(image/\w+);base64,([A-Za-z0-9+/=]+)", text)
    if not found:
        found = [
            (mime, data)
            for data, mime in re.findall(
                r'"data": "([A-Za-z0-9+/=]{100,})", "(?:media_type|mimeType)": "(image/\w+)"',
                text,
            )
        ]
    for _, data in found:
        base64.b64decode(data, validate=True)
    return [ProviderImage(data, mime) for mime, data in found]


def _max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        if key in body:
            return int(body[key])
    value = body.get("generationConfig", {}).get("maxOutputTokens")
    return int(value) if value is not None else None


def first_request(cassette: Cassette, **overrides: Any) -> ProviderRequest:
    """The neutral request equivalent to the cassette's first recorded request.

    System prompt, user text, images and the output cap come from the recording; tools from the
    scenario name (``tool`` / ``thinking``: weather, ``multi_tool``: add and multiply).
    """
    body = cassette.interactions[0].recorded_request()
    system, user = _texts(body)
    name = cassette.path.stem
    if name.startswith("multi_tool"):
        tools = [ADD, MULTIPLY]
    elif name.startswith(("tool", "thinking")):
        tools = [WEATHER]
    else:
        tools = []
    messages = [ProviderMessage("system", system)] if system else []
    messages.append(ProviderMessage("user", user, images=_images(body)))
    url_model = re.search(r"/models/([^/:]+):", cassette.interactions[0].url)
    request = ProviderRequest(
        model=str(body.get("model") or (url_model.group(1) if url_model else "")),
        messages=messages,
        tools=tools,
        max_tokens=_max_tokens(body),
        env=lambda name: f"test-key-for-{name}",
    )
    return replace(request, **overrides)


async def run_conversation(
    provider: Provider, request: ProviderRequest, *, stream: bool, turns: int = 4
) -> list[ProviderResponse]:
    """Call the provider, answer its tool calls with :data:`TOOL_RESULTS`, repeat until done."""
    responses: list[ProviderResponse] = []
    messages = list(request.messages)
    for _ in range(turns):
        call = replace(request, messages=list(messages))
        if stream:
            response = await collect_stream(provider.stream(call))
        else:
            response = await provider.generate(call)
        responses.append(response)
        if not response.tool_calls:
            break
        messages.append(
            ProviderMessage(
                "assistant",
                response.content,
                tool_calls=response.tool_calls,
                reasoning=response.reasoning,
                reasoning_details=response.reasoning_details,
            )
        )
        messages.extend(
            ProviderMessage("tool", TOOL_RESULTS[c.name], tool_call_id=c.id, tool_name=c.name)
            for c in response.tool_calls
        )
    return responses


# ---------------------------------------------------------------------------------------------
# Synthetic failures
# ---------------------------------------------------------------------------------------------


def failing_transport(
    status: int, body: str = "", headers: Mapping[str, str] | None = None
) -> httpx.MockTransport:
    """A transport answering every request with ``status``."""
    return httpx.MockTransport(
        lambda request: httpx.Response(status, headers=dict(headers or {}), text=body)
    )


def raising_transport(error: Callable[[httpx.Request], Exception]) -> httpx.MockTransport:
    """A transport raising ``error(request)`` for every request."""

    def handle(request: httpx.Request) -> httpx.Response:
        raise error(request)

    return httpx.MockTransport(handle)


def sse_transport(
    events: Iterable[str], *, status: int = 200, seen: list[httpx.Request] | None = None
) -> httpx.MockTransport:
    """A transport answering with the given SSE ``data``/``event`` blocks."""
    text = "".join(block.rstrip("\n") + "\n\n" for block in events)

    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, headers={"content-type": "text/event-stream"}, text=text)

    return httpx.MockTransport(handle)


def json_transport(
    payload: Any, *, status: int = 200, seen: list[httpx.Request] | None = None
) -> httpx.MockTransport:
    """A transport answering every request with a JSON document, recording the requests."""

    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, json=payload)

    return httpx.MockTransport(handle)


ERROR_CASES = [
    # status, headers, body, code, retry_after
    (429, {"Retry-After": "7"}, '{"error": {"message": "Rate limit reached"}}', "rate_limit", 7.0),
    (
        429,
        {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
        "slow down",
        "rate_limit",
        0.0,
    ),
    (429, {"retry-after-ms": "1500"}, "", "rate_limit", 1.5),
    (401, {}, '{"error": {"message": "invalid x-api-key"}}', "auth_error", None),
    (403, {}, "forbidden", "auth_error", None),
    (400, {}, '{"error": {"message": "bad model"}}', "invalid_request", None),
    (404, {}, "no such model", "invalid_request", None),
    (422, {}, "unprocessable", "invalid_request", None),
    (500, {}, "internal error", "server_error", None),
    (503, {}, "unavailable", "server_error", None),
    (529, {}, '{"type": "error", "error": {"type": "overloaded_error"}}', "server_error", None),
]
"""Synthetic HTTP failures and the error code / ``retry_after`` each must map to."""

TRANSPORT_CASES = [
    (lambda r: httpx.ReadTimeout("read timed out", request=r), "timeout"),
    (lambda r: httpx.ConnectTimeout("connect timed out", request=r), "timeout"),
    (lambda r: httpx.ConnectError("connection refused", request=r), "server_error"),
    (lambda r: httpx.RemoteProtocolError("peer closed", request=r), "server_error"),
    (lambda r: httpx.DecodingError("bad gzip", request=r), "unknown"),
]
"""Transport exceptions and the error code each must map to."""


def env_of(**values: str) -> Callable[[str], str | None]:
    """An ``env`` function over fixed values (nothing from the process environment)."""
    return values.get
