"""OpenTelemetry spans for turns, model calls, tool calls and subagent runs (optional).

Install the extra (``pip install 'standard-agents[otel]'``) and configure a tracer provider the
usual way (``opentelemetry.trace.set_tracer_provider``), or hand one to the runtime's spans only
with :func:`set_tracer_provider`. Without the extra nothing is imported and every helper here
just runs the wrapped work. ``SA_TELEMETRY=off`` disables spans even with the extra.

Spans follow the OpenTelemetry GenAI semantic conventions:

- ``invoke_agent <agent>``: one flow run (a turn) of a thread; ``subagent_run <agent>`` for a
  subagent thread, started as the root of its own trace and *linked* to the parent's
  ``execute_tool`` span that created it, so the parent's trace and the child's join up across
  threads, even when the child runs long after the call returned.
- ``chat <model>``: each model attempt, with ``gen_ai.operation.name``, ``gen_ai.system``,
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``, the prompt
  cache's ``gen_ai.usage.cache_read.input_tokens`` / ``cache_creation.input_tokens`` (both
  included in ``input_tokens``), finish reason, cost and error type. Timed from the attempt's
  measured latency.
- ``execute_tool <tool>``: each tool call, with ``gen_ai.tool.name`` and ``gen_ai.tool.call.id``.

Every span carries ``sa.thread_id`` and ``sa.package``. Spans hold names, ids, counts and
statuses only: never prompts, arguments, results or variable values, so no secret reaches them.

Across servers, traces join up through the W3C trace context (``traceparent``,
``tracestate``, with the configured propagator, W3C by default):

- ``invoke_agent <remote agent>`` (kind ``CLIENT``): each exchange of a remote child with its
  A2A agent; its requests carry the span's context (:func:`trace_headers`);
- an A2A server request is a ``SERVER`` span continuing the context the request carries
  (:func:`server_span`), and the turn it starts continues that span
  (:func:`continue_trace`): its ``invoke_agent`` span is the request span's child, not the
  root of a trace of its own. The message the request sends carries that span's context in
  its ``metadata.trace_context`` (:func:`carried_context`, W3C headers), queued with it: with
  several workers (PostgreSQL), whichever worker runs the turn continues the trace.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.turn.flow import Flow
    from sa_core.spec import ToolCall
    from sa_core.state import ThreadState

T = TypeVar("T")
INSTRUMENTATION = "sa_core"
_available: bool | None = None
_provider: Any = None
_tool_span: ContextVar[tuple[str, Any] | None] = ContextVar("sa_tool_span", default=None)
_origins: dict[str, Any] = {}
_MAX_ORIGINS = 10_000
_incoming: dict[str, Any] = {}
"""Thread id -> the span context (an A2A request's) its next turn continues."""
TRACE_CONTEXT = "trace_context"
"""The message metadata key holding the trace context (W3C headers) its turn continues."""
_turn_recording: ContextVar[bool | None] = ContextVar("sa_turn_recording", default=None)
"""Whether the turn running in this context records spans (decided as the turn starts)."""


def active() -> bool:
    """Whether spans are recorded: the ``otel`` extra is on and a tracer provider is configured.

    Without a configured provider every span would be a no-op that still costs step time.
    Called a few times per model step, so the cheap checks come first: once OpenTelemetry is
    imported, ``SA_TELEMETRY`` is read only when a provider is configured (before that, it is
    read first, so that ``off`` never imports it).
    """
    global _available
    if _available is None:
        # find_spec on a top-level name does not import the package.
        _available = importlib.util.find_spec("opentelemetry") is not None
    if not _available or (_trace is None and _provider is None and _switched_off()):
        return False
    return _configured() and not _switched_off()


def recording() -> bool:
    """Whether spans are recorded here: the running turn's decision, else :func:`active`.

    A turn checks :func:`active` once, as it starts; its model and tool calls reuse that
    answer instead of checking the environment and the tracer provider on every call. A
    provider configured (or ``SA_TELEMETRY`` changed) during a turn applies from the next one.
    """
    decided = _turn_recording.get()
    return active() if decided is None else decided


def _switched_off() -> bool:
    """Whether ``SA_TELEMETRY`` switches spans off."""
    return os.environ.get("SA_TELEMETRY", "").strip().lower() in ("off", "0", "false", "no")


_trace: Any = None
"""``opentelemetry.trace``, once :func:`_configured` imported it."""
_global_set = False
"""Whether a global tracer provider was found (OpenTelemetry sets it once, for good)."""
_TRACE_MODULE = "opentelemetry.trace"
_PROVIDER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"
"""OpenTelemetry's variable naming a tracer provider to load when none was set."""


def _configured() -> bool:
    """Whether a tracer provider records anything (no SDK configured: every span is a no-op).

    Setting a global tracer provider imports ``opentelemetry.trace`` (or names one in
    ``OTEL_PYTHON_TRACER_PROVIDER``, which that module reads); while neither happened, nothing
    is configured and OpenTelemetry (~20 ms to import: it scans every installed package's entry
    points) is not imported here either.
    """
    global _trace, _global_set
    if _provider is not None or _global_set:
        return True
    trace = _trace
    if trace is None:
        if _TRACE_MODULE not in sys.modules and not os.environ.get(_PROVIDER_VARIABLE):
            return False
        from opentelemetry import trace

        _trace = trace
    provider = trace.get_tracer_provider()
    _global_set = not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
    return _global_set


def set_tracer_provider(provider: Any) -> None:
    """Use ``provider`` for standard-agents spans (``None``: the global provider)."""
    global _provider
    _provider = provider


def _tracer() -> Any:
    from opentelemetry import trace

    provider = _provider if _provider is not None else trace.get_tracer_provider()
    return provider.get_tracer(INSTRUMENTATION)


def _thread_attributes(state: ThreadState | ThreadRef) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "sa.thread_id": state.thread_id,
        "sa.package": state.row.package,
    }
    if state.row.parent_id is not None:
        attributes["sa.parent_thread_id"] = state.row.parent_id
    return attributes


async def turn(flow: Flow, run: Callable[[], Awaitable[T]]) -> T:
    """Run a flow inside an ``invoke_agent`` (or ``subagent_run``) span."""
    on = active()
    token = _turn_recording.set(on)
    try:
        if not on:
            return await run()
        return await _traced_turn(flow, run)
    finally:
        _turn_recording.reset(token)


async def _traced_turn(flow: Flow, run: Callable[[], Awaitable[T]]) -> T:
    """:func:`turn` when spans are recorded."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    state = flow.state
    agent = state.row.agent_id
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "sa.depth": flow.depth,
        **_thread_attributes(state),
    }
    kwargs: dict[str, Any] = {}
    name = f"invoke_agent {agent}"
    if state.row.parent_id is not None and flow.depth == 0:
        name = f"subagent_run {agent}"
        origin = _tool_span.get()
        if origin is not None and origin[0] == state.row.parent_id:
            if len(_origins) >= _MAX_ORIGINS:
                _origins.pop(next(iter(_origins)))
            _origins[state.thread_id] = origin[1]
        linked = _origins.get(state.thread_id)
        kwargs["context"] = otel_context.Context()  # its own trace, linked to the parent's
        if linked is not None:
            kwargs["links"] = [trace.Link(linked, {"sa.link": "spawned_by_tool_call"})]
    elif flow.depth == 0 and (incoming := _incoming_of(flow)) is not None:
        kwargs["context"] = trace.set_span_in_context(trace.NonRecordingSpan(incoming))
    with _tracer().start_as_current_span(name, attributes=attributes, **kwargs) as span:
        result = await run()
        span.set_attribute("sa.stop_reason", str(flow.stopped_by or result))
        return result


def _incoming_of(flow: Flow) -> Any:
    """The span context a top-level turn continues (None: it starts a trace of its own).

    An A2A request's, noted in this process (:func:`continue_trace`), else the one the turn's
    first message or queue entry carries (sent through another worker).
    """
    noted = _incoming.pop(flow.thread.thread_id, None)
    if noted is not None:
        return noted
    for item in (*flow.messages[:1], *(flow.queued_entries or ())[:1]):
        carried = (item.metadata or {}).get(TRACE_CONTEXT)
        if isinstance(carried, dict):
            from opentelemetry import propagate, trace

            headers = {str(k): str(v) for k, v in carried.items()}
            span_context = trace.get_current_span(propagate.extract(headers)).get_span_context()
            return span_context if span_context.is_valid else None
    return None


async def tool_call(state: ThreadState, call: ToolCall, work: Awaitable[Any]) -> Any:
    """Await a tool call inside an ``execute_tool`` span; child threads it starts link to it."""
    if not recording():
        return await work
    from opentelemetry.trace import Status, StatusCode

    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        **_thread_attributes(state),
    }
    with _tracer().start_as_current_span(
        f"execute_tool {call.name}", attributes=attributes
    ) as span:
        token = _tool_span.set((state.thread_id, span.get_span_context()))
        try:
            result = await work
        finally:
            _tool_span.reset(token)
        status = getattr(result, "status", None)
        if status is not None:
            span.set_attribute("sa.tool_status", str(status))
        if status == "error":
            span.set_status(Status(StatusCode.ERROR))
            code = getattr(result, "error_code", None)
            span.set_attribute("error.type", str(code or "tool_error"))
        return result


def model_attempt(state: ThreadState | ThreadRef, data: dict[str, Any]) -> None:
    """Record one finished model attempt as a ``chat`` span (timed from its latency)."""
    if not recording():
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    end = time.time_ns()
    latency = data.get("latency_ms")
    start = end - int(float(latency) * 1_000_000) if isinstance(latency, int | float) else end
    model = str(data.get("model") or "")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": str(data.get("provider") or ""),
        "gen_ai.provider.name": str(data.get("provider") or ""),
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": int(data.get("input_tokens") or 0),
        "gen_ai.usage.output_tokens": int(data.get("output_tokens") or 0),
        "gen_ai.usage.cache_read.input_tokens": int(data.get("cached_tokens") or 0),
        "gen_ai.usage.cache_creation.input_tokens": int(data.get("cache_write_tokens") or 0),
        "sa.usage.reasoning_tokens": int(data.get("reasoning_tokens") or 0),
        "sa.model_name": str(data.get("model_name") or ""),
        "sa.attempt": int(data.get("attempt") or 1),
        **_thread_attributes(state),
    }
    if data.get("finish_reason"):
        attributes["gen_ai.response.finish_reasons"] = [str(data["finish_reason"])]
    if data.get("cost_total") is not None:
        attributes["sa.cost_usd"] = float(data["cost_total"])
    span = _tracer().start_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes, start_time=start
    )
    if data.get("error"):
        span.set_attribute("error.type", str(data.get("error_type") or "model_error"))
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=end)


def trace_headers() -> dict[str, str]:
    """The trace context of the current span as headers (``traceparent``...); {} when off."""
    if not recording():
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextmanager
def server_span(
    name: str, headers: Mapping[str, str], attributes: dict[str, Any]
) -> Iterator[None]:
    """Run a request inside a ``SERVER`` span continuing the trace context of its headers."""
    if not active():
        yield
        return
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    parent = propagate.extract(headers)
    with _tracer().start_as_current_span(
        name, context=parent, kind=SpanKind.SERVER, attributes=attributes
    ):
        yield


def continue_trace(thread_id: str) -> None:
    """Let the thread's next turn continue the current span (an A2A request's) as its parent."""
    if not active():
        return
    from opentelemetry import trace

    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        if len(_incoming) >= _MAX_ORIGINS:
            _incoming.pop(next(iter(_incoming)))
        _incoming[thread_id] = span_context


def carried_context(thread_id: str) -> dict[str, str] | None:
    """The trace context (W3C headers) the thread's next turn continues, if one was noted.

    :meth:`~sa_core.state.ThreadState.send_message` stores it on the message it sends, so the
    turn continues the trace on whichever worker runs it.
    """
    span_context = _incoming.get(thread_id) if _incoming else None
    if span_context is None:
        return None
    from opentelemetry import propagate, trace

    carrier: dict[str, str] = {}
    propagate.inject(carrier, trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    return carrier or None


@asynccontextmanager
async def remote_call(state: ThreadRef, agent: str, url: str) -> AsyncIterator[Any]:
    """Run a remote agent's exchange inside a ``CLIENT`` ``invoke_agent <agent>`` span.

    Yields:
        The span (set more attributes on it with :func:`annotate`), or None when off.
    """
    if not recording():
        yield None
        return
    from urllib.parse import urlsplit

    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "server.address": urlsplit(url).hostname or "",
        **_thread_attributes(state),
    }
    with _tracer().start_as_current_span(
        f"invoke_agent {agent}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def annotate(span: Any, attributes: dict[str, Any], error: str | None = None) -> None:
    """Set attributes on a span from :func:`remote_call` (and mark it failed on ``error``)."""
    if span is None:
        return
    span.set_attributes(attributes)
    if error:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR))
