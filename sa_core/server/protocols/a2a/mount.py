"""The A2A endpoints, one ASGI app mounted at ``/a2a`` in the Litestar app.

- ``GET /a2a``: the cards of every served agent (needs a key).
- ``GET /a2a/{package}/{agent}/.well-known/agent-card.json``: one agent's card (public: A2A
  clients read it to learn where to connect and that they need a Bearer key).
- ``POST /a2a/_push/{thread id}``: push notifications from remote agents for the tasks of
  remote children (:mod:`sa_core.engine.remote.remote_push`), authenticated by the per-task token in
  ``X-A2A-Notification-Token`` instead of an API key.
- ``POST /a2a/{package}/{agent}``: the JSON-RPC binding (``SendMessage``,
  ``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``SubscribeToTask``, the push
  configs' ``CreateTaskPushNotificationConfig``, ``Get...``, ``List...``, ``Delete...``, and
  the v0.3 names ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe``, ``tasks/pushNotificationConfig/set|get|list|delete``), served by the
  SDK's request handler (:mod:`.handler`) with our executor, task store and push-notification
  store (:mod:`.push_store`). Needs ``Authorization: Bearer``. With OpenTelemetry on, each
  request is a server span continuing the caller's W3C trace context (``traceparent``), and
  the turn it starts runs under it.

A key limited to some packages sees only their cards in ``GET /a2a`` and gets 404 from the
other packages' agents; a read-only key may read tasks (``GetTask``, ``SubscribeToTask``, ...)
but not send messages or cancel (403, :mod:`sa_core.server.rpc_writes`).

The per-agent handlers are built on the first request, once the runtime has loaded its packs.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from litestar.types import Receive, Scope, Send
from starlette.routing import Router

from sa_core import telemetry
from sa_core.engine.remote.remote_push import PUSH_PATH, notified
from sa_core.runtime import Runtime
from sa_core.server.protocols.a2a.cards import agent_card, agent_path
from sa_core.server.protocols.a2a.contexts import ThreadContextBuilder
from sa_core.server.protocols.a2a.executor import ThreadAgentExecutor
from sa_core.server.protocols.a2a.handler import ThreadRequestHandler
from sa_core.server.protocols.a2a.paths import PREFIX
from sa_core.server.protocols.a2a.push_delivery import PushDelivery, url_allowed
from sa_core.server.protocols.a2a.push_store import DurablePushSender, ThreadPushConfigStore
from sa_core.server.protocols.a2a.taskstore import AgentRoute, ThreadTaskStore
from sa_core.server.rpc_writes import refuse_writes
from sa_core.store import ApiKeyRow

PUSH_PREFIX = PUSH_PATH.rstrip("/") + "/"
"""Push notifications for remote children (``POST /a2a/_push/{thread id}``): token, no key."""
TOKEN_HEADER = b"x-a2a-notification-token"
PUSH_BODY_LIMIT = 1024 * 1024
INTERRUPTED_RELEASE_SECONDS = 600.0
"""An SDK task object waiting for input is dropped from memory after this long (the task stays
in the database; a later request loads it again)."""
READS = frozenset(
    {
        "GetTask", "ListTasks", "SubscribeToTask", "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs", "GetExtendedAgentCard", "tasks/get",
        "tasks/resubscribe", "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list", "agent/getAuthenticatedExtendedCard",
    }
)  # fmt: skip
"""The JSON-RPC methods (A2A 1.0 and v0.3 names) that only read: all a read-only key may call."""


class A2AServer:
    """The A2A endpoints of a runtime's entry agents."""

    def __init__(self, runtime: Runtime, push: PushDelivery) -> None:
        """Serve ``runtime``'s entry agents (built lazily, see the module docstring).

        Args:
            runtime: The runtime.
            push: The loop sending the push notifications the tasks owe.
        """
        self.runtime = runtime
        self.push = push
        self._router: Router | None = None
        self._handlers: list[ThreadRequestHandler] = []
        self._routes: dict[tuple[str, str], tuple[AgentRoute, ThreadTaskStore]] = {}

    def agents(self, key: ApiKeyRow | None = None) -> list[tuple[str, str]]:
        """``(package, agent)`` of every served agent (that ``key`` opens), in package order."""
        return [
            (scope.package, name)
            for scope in self.runtime.registry.scopes.values()
            if key is None or key.allows(scope.package)
            for name in scope.pack.entry_agent_names()
            if name in scope.agents
        ]

    def _build(self) -> Router:
        routes = []
        for package, agent in self.agents():
            route = AgentRoute(self.runtime, package, agent)
            tasks = ThreadTaskStore(route)
            sender = DurablePushSender(route, self.push)
            route.push = sender.queue
            handler = ThreadRequestHandler(
                route,
                tasks,
                agent_executor=ThreadAgentExecutor(route),
                agent_card=agent_card(self.runtime.registry.scopes[package], agent, ""),
                request_context_builder=ThreadContextBuilder(route),
                interrupted_task_timeout=INTERRUPTED_RELEASE_SECONDS,
                push_config_store=ThreadPushConfigStore(route, self.push),
                push_sender=sender,
                push_url_validator=url_allowed,
            )
            self._handlers.append(handler)
            self._routes[(package, agent)] = (route, tasks)
            routes.extend(
                create_jsonrpc_routes(handler, agent_path(package, agent), enable_v0_3_compat=True)
            )
        return Router(routes=routes)

    def _ensure_built(self) -> Router:
        if self._router is None:
            self._router = self._build()
        return self._router

    def is_live(self, task_id: str) -> bool:
        """Whether a task's executor runs in this process now."""
        return any(task_id in route.live for route, _ in self._routes.values())

    async def refresh_task(self, task_id: str, thread_id: str) -> None:
        """Read a task again from its thread; queue the push notifications it owes.

        Reading it stores a new state (and queues its notifications) when its turn moved on;
        queuing again covers a state stored by a process that died before it queued.
        """
        self._ensure_built()
        row = await self.runtime.store.get_thread(thread_id)
        found = self._routes.get((row.package, row.agent_id)) if row is not None else None
        if found is None:
            return  # the thread's agent is no longer served here
        route, tasks = found
        task = await tasks.get(task_id, ServerCallContext())
        if task is not None and route.push is not None:
            await route.push(task_id, int(task.status.state))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under ``/a2a`` (Litestar gives the path below the mount)."""
        path = str(scope.get("path", ""))
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            path = PREFIX + path
        path = path.rstrip("/")
        method = scope.get("method", "GET")
        if path.endswith(AGENT_CARD_WELL_KNOWN_PATH) and method in ("GET", "HEAD"):
            card = self._card(path.removesuffix(AGENT_CARD_WELL_KNOWN_PATH), scope)
            if card is None:
                detail = f"No A2A agent at {path}."
                await _json(send, 404, {"error": "agent_not_found", "detail": detail})
            else:
                await _json(send, 200, card)
            return
        if path.startswith(PUSH_PREFIX) and method == "POST":
            await self._push(scope, receive, send, path.removeprefix(PUSH_PREFIX))
            return
        key = await self._key(scope)
        if key is None:
            await _json(
                send,
                401,
                {
                    "error": "unauthorized",
                    "detail": "Send 'Authorization: Bearer <key>' with an active API key.",
                },
                {"www-authenticate": "Bearer"},
            )
            return
        if path == PREFIX and method == "GET":
            cards = [
                agent_card_to_dict(agent_card(self.runtime.registry.scopes[p], a, _base(scope)))
                for p, a in self.agents(key)
            ]
            await _json(send, 200, {"agents": cards})
            return
        if not key.allows(path.removeprefix(PREFIX + "/").split("/", 1)[0]):
            detail = f"No A2A agent at {path}."
            await _json(send, 404, {"error": "agent_not_found", "detail": detail})
            return
        if key.read_only:
            replay = await refuse_writes(key, scope, receive, send, READS.__contains__)
            if replay is None:
                return
            receive = replay
        router = self._ensure_built()
        inner = dict(scope, path=path, raw_path=path.encode(), root_path="")
        if not telemetry.active():
            await router(inner, receive, send)  # type: ignore[arg-type]
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        attributes = {"http.request.method": method, "url.path": path, "rpc.system": "jsonrpc"}
        with telemetry.server_span(f"{method} {path}", headers, attributes):
            await router(inner, receive, send)  # type: ignore[arg-type]

    async def _push(self, scope: Scope, receive: Receive, send: Send, thread_id: str) -> None:
        """A remote agent's push notification for a remote child's task (its token checked)."""
        await _drain(receive)
        token = next(
            (v.decode("latin-1") for k, v in scope.get("headers", []) if k == TOKEN_HEADER), ""
        )
        if await notified(self.runtime.kernel, thread_id, token):
            await _json(send, 200, {"status": "accepted"})
        else:
            detail = "Unknown task, or a notification token that does not match."
            await _json(send, 401, {"error": "unauthorized", "detail": detail})

    def _card(self, base: str, scope: Scope) -> dict[str, Any] | None:
        for package, agent in self.agents():
            if agent_path(package, agent) == base:
                card = agent_card(self.runtime.registry.scopes[package], agent, _base(scope))
                return agent_card_to_dict(card)
        return None

    async def _key(self, scope: Scope) -> ApiKeyRow | None:
        """The active key of the request's ``Authorization: Bearer`` header, if any."""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                kind, _, token = value.decode("latin-1").partition(" ")
                if kind.lower() == "bearer" and token.strip():
                    return await self.runtime.store.verify_api_key(token.strip())
                return None
        return None

    async def aclose(self) -> None:
        """Drain the SDK handlers' running tasks (at shutdown)."""
        for handler in self._handlers:
            await handler.aclose()


def _base(scope: Scope) -> str:
    """``scheme://host`` of the request (as the client addressed the server)."""
    host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
    if host is None:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


async def _drain(receive: Receive, limit: int = PUSH_BODY_LIMIT) -> None:
    """Read a request body to its end (up to ``limit`` bytes are read; the rest is refused)."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b"")) if message["type"] == "http.request" else 0
        if message["type"] != "http.request" or not message.get("more_body") or size > limit:
            return


async def _json(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    start: Any = {"type": "http.response.start", "status": status, "headers": raw}
    body_event: Any = {"type": "http.response.body", "body": data}
    await send(start)
    await send(body_event)
