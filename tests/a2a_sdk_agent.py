"""An A2A agent built only from the a2a-sdk's own server classes (no standard-agents code).

:class:`SdkAgent` serves one agent on loopback with uvicorn in a background thread: the SDK's
``DefaultRequestHandler`` with an ``InMemoryTaskStore``, its JSON-RPC routes and its agent
card route. What the agent does is chosen by the message text:

* ``echo: TEXT``: a ``working`` status with a note, then the artifact ``TEXT``, completed
  with usage in the status metadata (12 input tokens, 5 output tokens, 0.25 USD);
* ``ask``: ``input-required`` ("Which colour?"); the next message into the same task completes
  it with ``You chose <text>``;
* ``slow NAME``: works until the test releases ``NAME`` (:meth:`SdkAgent.release`), then
  answers ``released NAME``; a cancel is recorded in :attr:`SdkAgent.canceled`;
* ``file``: text, a file part (``report.txt``) and a data part, completed;
* ``fail``: failed, with the status text ``It broke.``;
* ``link PATH``: the text ``Linked.`` and a file part by URL,
  ``<base>/files/PATH?sig=SIGNATURE`` (the agent serves ``small.txt`` and ``big.bin`` there,
  404 otherwise, behind ``token`` when set); ``link-other PATH``: the same file named by
  ``localhost`` (another origin);
* ``headers``: answers with the ``Authorization`` header it received (the remote echoing a
  secret back);
* anything else: ``you said: <text>``.

Every request's ``Authorization`` header is kept in :attr:`SdkAgent.authorizations`; with
``token`` set, requests without ``Bearer <token>`` get a 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from a2a.helpers.proto_helpers import new_data_part, new_raw_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from serve_process import free_port
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

LINKED = {"small.txt": b"linked body", "big.bin": b"0123456789" * 500}
"""The files the agent serves at ``/files/NAME`` (what ``link NAME`` answers with)."""
SIGNATURE = "signed-url-4242-abcd"
"""The query (``?sig=...``) of every linked file's URL: a signed URL's key."""


class Behaviour(AgentExecutor):
    """The agent's behaviour (see the module docstring)."""

    def __init__(self, agent: SdkAgent) -> None:
        self.agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        task = context.current_task
        task_id, context_id = str(context.task_id), str(context.context_id)
        if task is None:
            task = Task(id=task_id, context_id=context_id)
            task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            if context.message is not None:
                task.history.append(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task_id, context_id)
        self.agent.messages.append((context_id, task_id, text))
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._finish(updater, f"You chose {text}")
        elif text == "ask":
            question = updater.new_agent_message([new_text_part("Which colour?")])
            await updater.requires_input(question)
        elif text.startswith("slow "):
            await self._slow(updater, text.removeprefix("slow ").strip())
        elif text.startswith("echo: "):
            note = updater.new_agent_message([new_text_part("thinking it over")])
            await updater.start_work(note)
            await updater.add_artifact([new_text_part(text.removeprefix("echo: "))], name="answer")
            usage = {"usage": {"input_tokens": 12, "output_tokens": 5, "cost_usd": 0.25}}
            await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=usage)
        elif text == "file":
            parts = [
                new_text_part("Here is the report."),
                new_raw_part(b"the report body", media_type="text/plain", filename="report.txt"),
                new_data_part({"score": 7, "tags": ["a", "b"]}),
            ]
            await updater.add_artifact(parts, name="result")
            await updater.complete()
        elif text.startswith(("link ", "link-other ")):
            kind, path = text.split(" ", 1)
            base = self.agent.base
            if kind == "link-other":
                base = base.replace("127.0.0.1", "localhost")
            url = f"{base}/files/{path}?sig={SIGNATURE}"
            part = Part(url=url, filename=path, media_type="text/plain")
            await self._finish_parts(updater, [new_text_part("Linked."), part])
        elif text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("It broke.")]))
        elif text == "headers":
            seen = self.agent.authorizations[-1] if self.agent.authorizations else ""
            await self._finish(updater, f"I was sent: {seen}")
        else:
            await self._finish(updater, f"you said: {text}")

    async def _finish_parts(self, updater: TaskUpdater, parts: list[Any]) -> None:
        await updater.add_artifact(parts, name="answer")
        await updater.complete()

    async def _finish(self, updater: TaskUpdater, text: str) -> None:
        await updater.add_artifact([new_text_part(text)], name="answer")
        await updater.complete()

    async def _slow(self, updater: TaskUpdater, name: str) -> None:
        await updater.start_work(updater.new_agent_message([new_text_part(f"waiting for {name}")]))
        while name not in self.agent.released:
            await asyncio.sleep(0.05)
        await self._finish(updater, f"released {name}")

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.agent.canceled.append(str(context.task_id))
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


class CountingHandler(DefaultRequestHandler):
    """The SDK's request handler, counting ``tasks/get`` calls."""

    def __init__(self, agent: SdkAgent, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.agent = agent

    async def on_get_task(self, *args: Any, **kwargs: Any) -> Any:
        self.agent.gets += 1
        return await super().on_get_task(*args, **kwargs)


class SdkAgent:
    """The agent on a loopback port, in a background thread (see the module docstring).

    With ``push`` the card says the agent pushes, and it posts a notification (the SDK's
    ``BasePushNotificationSender``) for every event of a task registered with a config; the
    configs it received are in :attr:`push_configs`, the answers to its posts in
    :attr:`pushed`.
    """

    def __init__(
        self, token: str | None = None, *, streaming: bool = True, push: bool = False
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.card_url = f"{self.base}/.well-known/agent-card.json"
        self.token = token
        self.authorizations: list[str] = []
        self.file_authorizations: list[str] = []
        """The ``Authorization`` header of every request for a linked file."""
        self.messages: list[tuple[str, str, str]] = []
        """``(context_id, task_id, text)`` of every message received."""
        self.released: set[str] = set()
        self.canceled: list[str] = []
        self.gets = 0
        self.push_client: httpx.AsyncClient | None = None
        self.pushed: list[int] = []
        self.notifications: list[tuple[str, dict[str, str], bytes]] = []
        """``(URL, headers, body)`` of every notification posted (delivered or not)."""
        card = AgentCard(
            name="SDK helper",
            description="An agent made with the a2a-sdk alone.",
            version="1.0",
            supported_interfaces=[
                AgentInterface(url=self.base + "/rpc", protocol_binding="JSONRPC",
                               protocol_version="1.0")
            ],
            capabilities=AgentCapabilities(streaming=streaming, push_notifications=push),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="Echo", description="Says it back.", tags=["t"])],
        )  # fmt: skip
        self.push_configs = InMemoryPushNotificationConfigStore()
        sender = None
        if push:

            async def record(response: httpx.Response) -> None:
                self.pushed.append(response.status_code)

            async def keep(request: httpx.Request) -> None:
                self.notifications.append(
                    (str(request.url), dict(request.headers), request.content)
                )

            self.push_client = httpx.AsyncClient(
                event_hooks={"request": [keep], "response": [record]}
            )
            sender = BasePushNotificationSender(self.push_client, self.push_configs)
        handler = CountingHandler(
            self,
            agent_executor=Behaviour(self),
            task_store=InMemoryTaskStore(),
            agent_card=card,
            push_config_store=self.push_configs if push else None,
            push_sender=sender,
        )
        routes = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/rpc"),
            Route("/files/{name}", self._file),
        ]
        app = Starlette(routes=routes, lifespan=self._lifespan)
        app.add_middleware(BaseHTTPMiddleware, dispatch=self._check)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        yield
        if self.push_client is not None:  # closed on the loop that used it
            await self.push_client.aclose()

    async def _check(self, request: Request, call_next: Any) -> Response:
        if request.url.path == "/rpc":
            given = request.headers.get("authorization", "")
            self.authorizations.append(given)
            if self.token is not None and given != f"Bearer {self.token}":
                return JSONResponse({"error": "unauthorized"}, status_code=401)
        response: Response = await call_next(request)
        return response

    async def _file(self, request: Request) -> Response:
        given = request.headers.get("authorization", "")
        self.file_authorizations.append(given)
        if self.token is not None and given != f"Bearer {self.token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        body = LINKED.get(request.path_params["name"])
        if body is None:
            return JSONResponse({"error": "no such file"}, status_code=404)
        return Response(body, media_type="application/octet-stream")

    def notified_states(self) -> list[str]:
        """The task state each notification carried (``TASK_STATE_WORKING``...), in order."""
        states = []
        for _, _, body in self.notifications:
            event = json.loads(body)
            found = event.get("task") or event.get("statusUpdate") or {}
            states.append(str(found.get("status", {}).get("state", "")))
        return states

    def repush(self, index: int = -1) -> int:
        """Post a notification again, as it was (a retry, or a duplicate); its HTTP status."""
        url, headers, body = self.notifications[index]
        kept = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        return httpx.post(url, content=body, headers=kept, timeout=30).status_code

    def release(self, name: str) -> None:
        """Let the ``slow NAME`` task finish."""
        self.released.add(name)

    def __enter__(self) -> SdkAgent:
        self.thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(self.card_url, timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("the SDK agent did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
