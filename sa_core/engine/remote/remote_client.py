"""Talking to a remote A2A agent: its headers, its card, and an SDK client per exchange.

:func:`connect` resolves the definition's headers for a child thread (``${NAME}`` from the
child's variables, then the process environment), reads the agent card (cached for
:data:`CARD_TTL` seconds per runtime), checks that the endpoint the card names is on the
card's own origin when headers are sent (so a card cannot send our keys elsewhere), and
yields a :class:`Connection`: the a2a-sdk's client over one ``httpx`` client carrying the
headers (:mod:`sa_core.remote_http`, which imports ``httpx`` only then), and the current
span's W3C trace context when OpenTelemetry is on (:func:`sa_core.telemetry.trace_headers`).
Every failure
becomes a :class:`RemoteError` naming the agent and its URL, with the header values
scrubbed. The ``a2a`` extra is imported only inside functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sa_core.engine.secrets import MIN_SECRET_LENGTH, redact
from sa_core.remote_http import failure, new_client
from sa_core.spec.mcp import substitute
from sa_core.telemetry import trace_headers

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import RemoteAgentDefinition

CARD_TTL = 300.0
"""Seconds a fetched agent card is reused before it is read again."""
CONNECT_SECONDS = 10.0
"""How long connecting (and a non-streaming request) may take; streams may stay silent longer."""
PREFETCH_SECONDS = 3.0
"""How long a runtime's start waits for the cards of remote agents it describes by card."""
BINDINGS = ("JSONRPC", "HTTP+JSON")
"""The A2A protocol bindings this client speaks, in order of preference."""

_CARDS: weakref.WeakKeyDictionary[Kernel, dict[str, tuple[float, Any]]] = (
    weakref.WeakKeyDictionary()
)


class RemoteError(Exception):
    """An exchange with a remote agent failed; the message names the agent and its URL.

    Attributes:
        code: ``remote_config`` (a header variable without a value, a card endpoint elsewhere),
            ``remote_unreachable``, ``remote_auth``, ``remote_timeout``, ``remote_file`` (an
            answer's file could not be downloaded) or ``remote_error``.
    """

    def __init__(self, message: str, code: str = "remote_error") -> None:
        super().__init__(message)
        self.code = code


def where(remote: RemoteAgentDefinition) -> str:
    """``Remote agent 'name' (card URL)``: how every error names the agent."""
    return f"Remote agent '{remote.name}' ({remote.card_url})"


def resolve_headers(
    kernel: Kernel | None, thread: ThreadRef | None, remote: RemoteAgentDefinition
) -> tuple[dict[str, str], list[str]]:
    """The headers with ``${NAME}`` resolved, and the substituted values (to scrub).

    A variable resolves on the child thread (its env, user, instance, agent sources), then in
    the process environment; without a thread (a card read at start), the instance env and
    the process environment only.

    Raises:
        RemoteError: a referenced variable has no value (``remote_config``).
    """

    def lookup(name: str) -> str:
        value = None
        if kernel is not None and thread is not None:
            value = kernel.env_of(thread, name)
        elif kernel is not None:
            value = kernel.env.get(name)
        value = value if value is not None else os.environ.get(name)
        if value is None:
            raise RemoteError(
                f"{where(remote)}: header variable '{name}' has no value; set it on the thread "
                f"(or its parent), the instance env or the process environment.",
                "remote_config",
            )
        return value

    headers: dict[str, str] = {}
    secrets: list[str] = []
    for key, template in remote.headers.items():
        value = substitute(template, lookup)
        headers[key] = value
        if value != template and len(value) >= MIN_SECRET_LENGTH:
            secrets.append(value)
            secrets += [v for v in value.split() if len(v) >= MIN_SECRET_LENGTH and v != value]
    return headers, sorted(set(secrets), key=len, reverse=True)


def explain(remote: RemoteAgentDefinition, exc: BaseException, doing: str) -> RemoteError:
    """A :class:`RemoteError` for an SDK or HTTP failure while ``doing`` something."""
    from a2a.client.errors import AgentCardResolutionError
    from a2a.utils.errors import A2AError

    if isinstance(exc, RemoteError):
        return exc
    kind, detail = failure(exc)
    if kind == "auth":
        return RemoteError(
            f"{where(remote)} refused {doing} (HTTP {detail}): check the credentials in its "
            f"headers.",
            "remote_auth",
        )
    if kind == "timeout":
        return RemoteError(f"{where(remote)} timed out while {doing}.", "remote_timeout")
    if kind == "network":
        return RemoteError(
            f"{where(remote)} could not be reached while {doing}: {detail}", "remote_unreachable"
        )
    if isinstance(exc, AgentCardResolutionError):
        return RemoteError(
            f"{where(remote)}: its agent card could not be read: {exc.message}",
            "remote_unreachable",
        )
    detail = exc.message if isinstance(exc, A2AError) else detail
    return RemoteError(f"{where(remote)} failed while {doing}: {detail}")


def card_summary(card: Any) -> str:
    """The tool description a card gives: its name, description and skills."""
    text = card.name or "Remote agent"
    if card.description:
        text += f": {card.description.strip()}"
    skills = [
        f"{s.name or s.id}" + (f" ({s.description.strip()})" if s.description else "")
        for s in card.skills
    ]
    if skills:
        text += " Skills: " + "; ".join(skills) + "."
    return text


async def fetch_card(http: Any, remote: RemoteAgentDefinition) -> Any:
    """Read the agent card (``AgentCard``).

    Raises:
        RemoteError: the card could not be read or parsed.
    """
    from a2a.client import A2ACardResolver

    try:
        return await A2ACardResolver(http, remote.card_url).get_agent_card(relative_card_path="/")
    except Exception as exc:  # every failure: one error naming the agent
        raise explain(remote, exc, "reading its agent card") from exc


async def card_for(
    kernel: Kernel, http: Any, remote: RemoteAgentDefinition, fresh: bool = False
) -> Any:
    """The agent card, reused for :data:`CARD_TTL` seconds per runtime (``fresh``: read now)."""
    cards = _CARDS.setdefault(kernel, {})
    found = cards.get(remote.card_url)
    if found is not None and not fresh and time.monotonic() - found[0] < CARD_TTL:
        return found[1]
    card = await fetch_card(http, remote)
    cards[remote.card_url] = (time.monotonic(), card)
    if not remote.tool_description and remote.remember_card(card_summary(card)):
        kernel.caches.forget_tables()  # the tool's description changed
    return card


async def prefetch_cards(kernel: Kernel, seconds: float = PREFETCH_SECONDS) -> None:
    """Read, at start, the cards of remote agents without a ``tool_description`` (bounded).

    Their tools are then described by their cards from the first step on. A card not read
    within ``seconds`` (or failing) is read by the agent's first exchange instead, which
    updates the description.
    """
    remotes = [
        remote
        for scope in kernel.registry.scopes.values()
        for remote in scope.remote_agents.values()
        if not remote.tool_description
    ]
    if not remotes:
        return

    async def read(remote: RemoteAgentDefinition) -> None:
        try:
            headers, _ = resolve_headers(kernel, None, remote)
        except RemoteError:
            headers = {}  # a variable set per thread: try the (usually public) card without
        with contextlib.suppress(RemoteError):
            async with new_client(headers, seconds, seconds) as http:
                await card_for(kernel, http, remote, fresh=True)

    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await asyncio.gather(*(read(r) for r in remotes))


async def card_problems(
    remote: RemoteAgentDefinition, seconds: float = CONNECT_SECONDS
) -> list[str]:
    """What reading the agent's card now finds wrong (``sa validate --online``); [] when fine.

    Headers are resolved from the process environment; one that cannot be is reported, and
    the card is read without headers.
    """
    problems: list[str] = []
    try:
        headers, _ = resolve_headers(None, None, remote)
    except RemoteError as exc:
        problems.append(f"{exc} (checked without headers)")
        headers = {}
    try:
        async with new_client(headers, seconds, seconds) as http:
            card = await fetch_card(http, remote)
        check_endpoint(card, remote, headers)
    except RemoteError as exc:
        problems.append(str(exc))
    return problems


def endpoint(card: Any) -> Any:
    """The interface the client uses: the card's first one with a binding we speak."""
    return next((i for i in card.supported_interfaces if i.protocol_binding in BINDINGS), None)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def check_endpoint(card: Any, remote: RemoteAgentDefinition, headers: dict[str, str]) -> None:
    """Refuse a card without a usable endpoint, or (with headers) one on another origin.

    Raises:
        RemoteError: ``remote_config``.
    """
    chosen = endpoint(card)
    if chosen is None:
        bindings = ", ".join(i.protocol_binding for i in card.supported_interfaces) or "none"
        raise RemoteError(
            f"{where(remote)}: its card offers no JSONRPC or HTTP+JSON interface ({bindings}).",
            "remote_config",
        )
    if headers and _origin(chosen.url) != _origin(remote.card_url):
        raise RemoteError(
            f"{where(remote)}: its card names the endpoint {chosen.url}, on another origin than "
            f"the card; the headers are sent only to the card's origin, so set url to that "
            f"endpoint's card.",
            "remote_config",
        )


@dataclass(slots=True)
class Connection:
    """An SDK client for one exchange, with what errors must not show."""

    remote: RemoteAgentDefinition
    client: Any
    card: Any
    secrets: list[str]
    headers: dict[str, str]
    """The resolved headers (sent to the agent's origin only)."""

    @property
    def streaming(self) -> bool:
        """Whether the agent streams (``message/stream``, resubscribe)."""
        return bool(self.card.capabilities.streaming)

    def scrub(self, text: str) -> str:
        """``text`` with the header values replaced by ``[redacted]``."""
        return redact(text, self.secrets)

    def failure(self, exc: BaseException, doing: str) -> RemoteError:
        """A scrubbed :class:`RemoteError` for a failure while ``doing`` something."""
        error = explain(self.remote, exc, doing)
        return RemoteError(self.scrub(str(error)), error.code)


@asynccontextmanager
async def connect(
    kernel: Kernel, thread: ThreadRef, remote: RemoteAgentDefinition
) -> AsyncIterator[Connection]:
    """A :class:`Connection` to the remote agent for the child ``thread`` (see the module)."""
    from a2a.client import ClientConfig, ClientFactory

    headers, secrets = resolve_headers(kernel, thread, remote)
    traced = {**headers, **trace_headers()}  # W3C trace context: not a secret, any origin
    async with new_client(traced, CONNECT_SECONDS, None) as http:
        try:
            card = await card_for(kernel, http, remote)
        except RemoteError as exc:
            raise RemoteError(redact(str(exc), secrets), exc.code) from None
        check_endpoint(card, remote, headers)
        streaming = bool(card.capabilities.streaming)
        config = ClientConfig(
            streaming=streaming,
            polling=not streaming,
            httpx_client=http,
            supported_protocol_bindings=list(BINDINGS),
        )
        client = ClientFactory(config).create(card)
        try:
            yield Connection(remote, client, card, secrets, headers)
        finally:
            await client.close()


__all__ = [
    "CARD_TTL",
    "Connection",
    "RemoteError",
    "card_for",
    "card_problems",
    "card_summary",
    "check_endpoint",
    "connect",
    "explain",
    "fetch_card",
    "prefetch_cards",
    "resolve_headers",
    "where",
]
