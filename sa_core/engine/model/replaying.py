"""Replay inside the engine: recorded answers served at the model caller, threads followed.

A replay (:mod:`sa_core.replay` drives it) runs a recorded thread tree again on new threads.
The engine knows a replay's threads through :class:`Replays` (``kernel.replays``): one
:class:`~sa_core.engine.model.replay_record.ThreadCursor` per thread, the root's registered by the
driver, each child's when it is created (:meth:`Replays.child_created`), its path made of its
agent and its rank among its parent's children of that agent (``root/researcher#1``).

Where the engine asks:

- the model caller (:meth:`Replays.serve`): the call's request is hashed and compared with the
  recorded call of the same ordinal, and the chain of models is replaced by one attempt whose
  provider streams the recorded answer (:class:`ReplayProvider`): no provider is called;
- tool dispatch (:func:`sa_core.engine.turn.replay_tools.run_tool`): a recorded result, or the tool
  run again;
- the queue drain (:func:`sa_core.engine.turn.replay_tools.entries_to_drain`): the queued messages
  the recording says the thread took at this point, waited for when they have not arrived yet.

Nothing here costs a thread that is not replayed more than ``kernel.replays.active``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from sa_core.engine.model.recording import response_from_document
from sa_core.engine.model.replay_diff import request_diff
from sa_core.engine.model.replay_record import (
    Divergence,
    RecordedThread,
    ReplaySession,
    ThreadCursor,
)
from sa_core.engine.model.retry import ModelAttempt
from sa_core.errors import ProviderError
from sa_core.providers import ProviderResponse, StreamChunk, response_chunks

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.model.recording import Recorder, RequestDigest
    from sa_core.engine.threads import ThreadRef
    from sa_core.providers import ProviderRequest
    from sa_core.store import ThreadRow


class ReplayProvider:
    """Streams one recorded answer, or fails with ``error`` (the replay stopped or diverged)."""

    def __init__(self, name: str, response: ProviderResponse | None, error: str | None) -> None:
        self.name = name
        self._response = response
        self._error = error

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """The recorded answer."""
        if self._error is not None or self._response is None:
            raise ProviderError(self._error or "no recorded answer", "invalid_request")
        return self._response

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """The recorded answer as chunks (or one ``error`` chunk)."""
        if self._error is not None or self._response is None:
            yield StreamChunk(
                "error", error=self._error or "no recorded answer", code="invalid_request"
            )
            return
        async for chunk in response_chunks(self._response):
            yield chunk


class Replays:
    """The replays running in one runtime, by thread (see the module docstring)."""

    def __init__(self) -> None:
        self.cursors: dict[str, ThreadCursor] = {}
        self.active = False
        """Whether any replay runs (the engine asks nothing more otherwise; a plain attribute,
        read on every model call and tool round)."""

    def begin(self, session: ReplaySession, thread_id: str) -> ThreadCursor:
        """Follow ``thread_id`` as the replay's root."""
        cursor = ThreadCursor(session, thread_id, session.root.path, session.root)
        session.cursors[thread_id] = self.cursors[thread_id] = cursor
        self.active = True
        return cursor

    def end(self, session: ReplaySession) -> None:
        """Stop following the replay's threads."""
        for thread_id in session.cursors:
            self.cursors.pop(thread_id, None)
        self.active = bool(self.cursors)

    def cursor(self, thread: ThreadRef) -> ThreadCursor | None:
        """The replay cursor of ``thread``, when a replay runs it."""
        return self.cursors.get(thread.thread_id)

    def child_created(self, row: ThreadRow) -> None:
        """A thread was created: follow it when its parent is a replay's.

        A child the recording does not have diverges here, before it does anything.
        """
        parent = self.cursors.get(row.parent_id or "")
        if parent is None:
            return
        agent = row.agent_id
        parent.children[agent] += 1
        creator = (row.properties or {}).get("tool_call_id")
        recorded = _recorded_child(parent, agent, creator)
        session = parent.session
        if recorded is not None:
            parent.matched[agent] += 1
            path = recorded.path
        else:
            path = f"{parent.path}/{agent}#{parent.children[agent]}"
        cursor = ThreadCursor(session, row.id, path, recorded)
        session.cursors[row.id] = self.cursors[row.id] = cursor
        if recorded is None and parent.recorded is not None:
            known = ", ".join(c.path for c in parent.recorded.children) or "none"
            by = f" by tool call {creator}" if creator else ""
            session.diverge(
                Divergence(
                    "extra_child",
                    path,
                    None,
                    f"the replay created a child of agent '{agent}'{by} that the recording does "
                    f"not have (recorded children of {parent.path}: {known})",
                )
            )

    # -- model calls ------------------------------------------------------------------------

    def serve(
        self,
        kernel: Kernel,
        thread: ThreadRef,
        chain: list[ModelAttempt],
        recorder: Recorder,
    ) -> tuple[list[ModelAttempt], RequestDigest | None]:
        """The chain that answers a replayed thread's model call from the recording.

        Returns:
            ``chain`` as it is for a thread no replay runs; else one attempt serving the
            recorded answer (or failing, when the replay stopped or has no answer), with the
            request's digest.
        """
        cursor = self.cursors.get(thread.thread_id)
        if cursor is None:
            return chain, None
        session = cursor.session
        index = cursor.next_call
        cursor.next_call += 1
        first = chain[0]
        if session.stopped:
            return [_failing(first, "The replay stopped at its first divergence.")], None
        recorded = cursor.recorded
        if recorded is None:  # an extra child: diverged when it was created
            return [_failing(first, f"The recording has no thread {cursor.path}.")], None
        if index >= len(recorded.calls):
            session.diverge(
                Divergence(
                    "extra_model_call",
                    cursor.path,
                    index + 1,
                    f"the replay made model call #{index + 1}; the recording has "
                    f"{len(recorded.calls)}",
                )
            )
            return [_failing(first, "The recording has no answer for this call.")], None
        call = recorded.calls[index]
        entry = next((e for e in chain if e.request.model == call.request.get("model")), first)
        digest = recorder.digest(thread, entry.request)
        if digest.hash != call.request_hash:
            summary, diff = request_diff(recorded, index, digest, entry.request)
            session.diverge(Divergence("request_changed", cursor.path, index + 1, summary, diff))
            if session.stopped:
                return [_failing(entry, "The request differs from the recording.")], digest
        session.model_calls_served += 1
        response = response_from_document(call.response)
        _fill_call_ids(response, recorded, call.message_id)
        provider = ReplayProvider(entry.provider.name, response, None)
        served = ModelAttempt(
            entry.model_name,
            provider,
            entry.request,
            entry.input_price,
            entry.output_price,
            entry.cached_price,
            entry.cache_write_price,
        )
        return [served], digest


def _recorded_child(parent: ThreadCursor, agent: str, creator: str | None) -> RecordedThread | None:
    """The recorded child a new child of ``parent`` stands for, else ``None``.

    That is the next recorded child of its agent, made by the same tool call (when both calls
    are known).
    """
    if parent.recorded is None:
        return None
    found = parent.recorded.child(f"{parent.path}/{agent}#{parent.matched[agent] + 1}")
    if found is None or None in (found.created_by, creator) or found.created_by == creator:
        return found
    return None  # the next recorded one came from another call


def _failing(entry: ModelAttempt, error: str) -> ModelAttempt:
    return ModelAttempt(
        entry.model_name, ReplayProvider(entry.provider.name, None, error), entry.request
    )


def _fill_call_ids(
    response: ProviderResponse, recorded: RecordedThread, message_id: str | None
) -> None:
    """Give the answer's tool calls without an id the ids of the recorded message.

    The engine made those ids up when the provider gave none; with the recorded ones the
    replay's calls pair with the recording's.
    """
    if not any(not c.id for c in response.tool_calls):
        return
    message = next((m for m in recorded.messages if m.id == message_id), None)
    stored = list(message.tool_calls or []) if message is not None else []
    for index, call in enumerate(response.tool_calls):
        if not call.id:
            call.id = stored[index].id if index < len(stored) else f"call_replay{index:04d}"


__all__ = ["ReplayProvider", "Replays"]
