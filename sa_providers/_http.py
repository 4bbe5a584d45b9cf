"""HTTP plumbing shared by every built-in provider.

One place maps HTTP statuses and transport failures to :class:`ProviderError` codes, parses
``Retry-After``, keeps API keys out of messages, and reads server-sent events. Provider modules
only build request bodies and read response bodies.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from sa_core.errors import ProviderError
from sa_core.providers import BaseProvider, ProviderRequest
from sa_providers._stream import closing

if TYPE_CHECKING:
    import httpx

BODY_LIMIT = 500
"""How many characters of an error body a message quotes."""

RESERVED_OPTIONS: frozenset[str] = frozenset(
    {"base_url", "baseUrl", "key_variable", "headers", "api", "timeout"}
)
"""``provider_options`` keys the providers interpret; every other key goes into the body."""

_HINTS = {
    "rate_limit": "The provider is rate limiting; retry later.",
    "invalid_request": "Check the model id and the request options.",
    "server_error": "The provider failed; retrying may help.",
    "timeout": "The provider did not answer in time; retrying may help.",
}


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: its ``event`` name (if any) and its joined ``data`` lines."""

    event: str | None
    data: str


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[SSEEvent]:
    """Parse server-sent events from text lines (comments and ``id:``/``retry:`` are skipped)."""
    event: str | None = None
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SSEEvent(event, "\n".join(data))


def status_code_to_error(status: int) -> str:
    """Map an HTTP status to a provider error code."""
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth_error"
    if status == 408:
        return "timeout"
    if status in (400, 404, 413, 422):
        return "invalid_request"
    if status >= 500:
        return "server_error"
    return "unknown"


def error_code_from_name(name: str | None) -> str:
    """Map an error type named in a response body (``rate_limit_error``...) to a code."""
    text = (name or "").lower()
    for needle, code in (
        ("rate", "rate_limit"),
        ("quota", "rate_limit"),
        ("exhausted", "rate_limit"),
        ("deadline", "timeout"),
        ("auth", "auth_error"),
        ("permission", "auth_error"),
        ("key", "auth_error"),
        ("invalid", "invalid_request"),
        ("not_found", "invalid_request"),
        ("timeout", "timeout"),
        ("overloaded", "server_error"),
        ("server", "server_error"),
        ("api_error", "server_error"),
        ("unavailable", "server_error"),
        ("internal", "server_error"),
    ):
        if needle in text:
            return code
    return "unknown"


def _duration_seconds(text: str) -> float | None:
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)s\s*", text)
    return float(match.group(1)) if match else None


def parse_retry_after(
    headers: Mapping[str, str], body: Any = None, *, now: float | None = None
) -> float | None:
    """Return the seconds a failed response asks us to wait, or ``None``.

    Reads ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date) and a Google
    ``RetryInfo`` detail in the error body.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                moment = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                moment = None
            if moment is not None:
                return max(0.0, moment.timestamp() - (time.time() if now is None else now))
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and (seconds := _duration_seconds(delay)) is not None:
            return seconds
    return None


def redact(text: str, secret: str | None) -> str:
    """Replace every occurrence of ``secret`` in ``text``."""
    return text.replace(secret, "[redacted]") if secret else text


def trim(text: str, limit: int = BODY_LIMIT) -> str:
    """Collapse whitespace and cut ``text`` to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``base`` (nested dicts merge, everything else replaces)."""
    for key, value in extra.items():
        current = base.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            deep_merge(current, value)
        else:
            base[key] = value
    return base


def json_or_none(text: str) -> Any:
    """Parse JSON, or ``None`` when the text is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


@dataclass(slots=True)
class Endpoint:
    """Where and how one call goes: base URL, headers, and the key (never shown in reprs)."""

    base_url: str
    headers: dict[str, str]
    key: str | None = field(default=None, repr=False)
    key_variable: str | None = None


class HTTPProvider(BaseProvider):
    """A :class:`BaseProvider` that talks JSON over HTTP through the shared client.

    Subclasses implement :meth:`auth_headers`; the helpers here turn every failure into a
    :class:`ProviderError` whose message names the status and quotes the body, with the key
    redacted.
    """

    default_headers: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        *,
        name: str | None = None,
        base_url: str | None = None,
        key_variable: str | None = None,
        key_required: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(
            name=name,
            base_url=base_url,
            key_variable=key_variable,
            transport=transport,
            timeout=timeout,
        )
        self.key_required = key_required

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Headers that authenticate a call; the default is a bearer token."""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def endpoint(self, request: ProviderRequest) -> Endpoint:
        """Resolve base URL, key and headers for ``request``."""
        base_url = self.resolve_base_url(request)
        key = self.api_key(request, required=self.key_required)
        headers = {**self.default_headers, **self.auth_headers(key)}
        extra = request.provider_options.get("headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items()})
        variable = request.provider_options.get("key_variable") or self.key_variable
        return Endpoint(base_url, headers, key, str(variable) if variable else None)

    @staticmethod
    def listing_request(env: Callable[[str], str | None] | None) -> ProviderRequest:
        """Return an empty request that resolves variables through ``env`` (for listings)."""
        request = ProviderRequest(model="", messages=[])
        if env is not None:
            request.env = env
        return request

    @staticmethod
    def passthrough(body: dict[str, Any], request: ProviderRequest) -> dict[str, Any]:
        """Deep-merge the non-reserved ``provider_options`` into a request body."""
        extra = {k: v for k, v in request.provider_options.items() if k not in RESERVED_OPTIONS}
        return deep_merge(body, extra)

    def classify(self, status: int, text: str) -> str:
        """Return the error code for a failed response (override for vendor quirks)."""
        return status_code_to_error(status)

    def http_error(
        self, endpoint: Endpoint, status: int, text: str, headers: Mapping[str, str]
    ) -> ProviderError:
        """Build the error for a failed HTTP response."""
        code = self.classify(status, text)
        body = json_or_none(text)
        retry_after = parse_retry_after(headers, body) if code == "rate_limit" else None
        hint = _HINTS.get(code, "")
        if code == "auth_error":
            variable = endpoint.key_variable or "the provider's key variable"
            hint = f"Check the value of {variable}."
        if retry_after is not None:
            hint += f" Retry after {retry_after:g}s."
        message = f"{self.name}: HTTP {status} ({code}): {trim(text) or '<empty body>'} {hint}"
        return ProviderError(
            redact(message.strip(), endpoint.key),
            code,
            status,
            retry_after=retry_after,
            provider=self.name,
        )

    def transport_error(self, endpoint: Endpoint, exc: Exception) -> ProviderError:
        """Build the error for a transport failure (timeout, refused connection...)."""
        import httpx

        detail = redact(trim(str(exc) or type(exc).__name__), endpoint.key)
        if isinstance(exc, httpx.TimeoutException):
            code, what = "timeout", "timed out"
        elif isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
            code, what = "server_error", f"could not reach {endpoint.base_url}"
        else:
            code, what = "unknown", "request failed"
        message = f"{self.name}: {what} ({type(exc).__name__}: {detail})."
        if code == "server_error":
            message += " Is the server running and the base URL right?"
        return ProviderError(message, code, provider=self.name)

    def bad_response(self, endpoint: Endpoint, text: str) -> ProviderError:
        """Build the error for a successful status with an unreadable body."""
        message = f"{self.name}: unexpected response body: {trim(text) or '<empty body>'}"
        return ProviderError(redact(message, endpoint.key), "unknown", provider=self.name)

    def _url(self, endpoint: Endpoint, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else endpoint.base_url + path

    async def post_json(self, endpoint: Endpoint, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` and return the decoded JSON answer."""
        return await self._request_json("POST", endpoint, path, body=body)

    async def get_json(
        self, endpoint: Endpoint, path: str, params: Mapping[str, str] | None = None
    ) -> Any:
        """GET a JSON document."""
        return await self._request_json("GET", endpoint, path, params=params)

    async def _request_json(
        self,
        method: str,
        endpoint: Endpoint,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        headers = {**endpoint.headers, "Accept": "application/json"}
        content = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            content = json.dumps(body).encode()
        try:
            response = await self.client().request(
                method,
                self._url(endpoint, path),
                content=content,
                headers=headers,
                params=params,
            )
        except transport_failures() as exc:
            raise self.transport_error(endpoint, exc) from None
        if response.status_code >= 400:
            raise self.http_error(endpoint, response.status_code, response.text, response.headers)
        data = json_or_none(response.text)
        if data is None:
            raise self.bad_response(endpoint, response.text)
        return data

    async def post_sse(
        self, endpoint: Endpoint, path: str, body: dict[str, Any]
    ) -> AsyncIterator[SSEEvent]:
        """POST ``body`` and yield the server-sent events of the answer."""
        headers = {
            **endpoint.headers,
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
        }
        content = json.dumps(body).encode()
        url = self._url(endpoint, path)
        try:
            async with self.client().stream("POST", url, content=content, headers=headers) as resp:
                if resp.status_code >= 400:
                    text = (await resp.aread()).decode("utf-8", "replace")
                    raise self.http_error(endpoint, resp.status_code, text, resp.headers)
                if resp.headers.get("content-type", "").startswith("application/json"):
                    text = (await resp.aread()).decode("utf-8", "replace")
                    raise self.bad_response(endpoint, text)
                async with (
                    closing(resp.aiter_lines()) as lines,
                    closing(iter_sse(lines)) as events,
                ):
                    async for event in events:
                        yield event
        except transport_failures() as exc:
            raise self.transport_error(endpoint, exc) from None


def transport_failures() -> tuple[type[Exception], ...]:
    """The httpx errors of a request that got no usable answer (timeouts, refused connections).

    httpx is imported on a provider's first request, not with the provider: importing it also
    loads its command line (click, rich and pygments, when installed), ~80 ms that every
    runtime and ``sa serve`` loading the built-in providers would pay before any model call.
    """
    import httpx

    return (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)


def sse_json(event: SSEEvent, on_error: Callable[[str], ProviderError]) -> Any:
    """Decode an event's JSON data, raising ``on_error(data)`` when it is not JSON."""
    data = json_or_none(event.data)
    if data is None:
        raise on_error(event.data)
    return data
