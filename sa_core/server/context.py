"""Dependencies of the routes: the runtime, the package of the URL, and the thread of the URL.

A thread is reachable only under its own package: ``/api/packages/b/threads/<a thread of a>``
answers 404, exactly as an unknown id does.
"""

from __future__ import annotations

from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, SkipValidation

from sa_core.errors import ThreadNotFoundError
from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.errors import ApiError
from sa_core.state import ThreadState
from sa_core.store import ThreadRow

# Dependencies are passed through as they are (Litestar would otherwise re-validate them).
PackDep = NamedDependency[SkipValidation[PackScope]]
RuntimeDep = NamedDependency[SkipValidation[Runtime]]
ThreadDep = NamedDependency[SkipValidation[ThreadState]]
MessageThreadDep = NamedDependency[SkipValidation[ThreadState]]
"""The thread of the URL, for a message about to be sent on it (see ``thread_for_message``)."""


def runtime_dependency(runtime: Runtime) -> Provide:
    """Provide ``runtime`` to handlers."""

    async def provide_runtime() -> Runtime:
        return runtime

    return Provide(provide_runtime, use_cache=True)


def package_dependencies(scope: PackScope, runtime: Runtime | None = None) -> dict[str, Provide]:
    """Dependencies of one package's router: ``pack`` (its scope) and ``thread``.

    Given the ``runtime``, ``thread`` is resolved without other dependencies: Litestar resolves
    two or more dependencies of one level in a task group (a task each, so a request waits a
    turn of the event loop behind every other ready task per dependency), and a route that
    needs only the thread (posting a message, the hot path) then needs no task.
    """

    async def provide_pack() -> PackScope:
        return scope

    if runtime is None:
        return {
            "pack": Provide(provide_pack, use_cache=True),
            "thread": Provide(provide_thread),
            "message_thread": Provide(provide_message_thread),
        }
    bound = runtime

    async def provide_package_thread(thread_id: FromPath[str]) -> ThreadState:
        return await load_thread(bound, scope, thread_id)

    async def provide_package_message_thread(thread_id: FromPath[str]) -> ThreadState:
        return await load_thread(bound, scope, thread_id, for_message=True)

    return {
        "pack": Provide(provide_pack, use_cache=True),
        "thread": Provide(provide_package_thread),
        "message_thread": Provide(provide_package_message_thread),
    }


async def provide_thread(
    thread_id: FromPath[str], runtime: RuntimeDep, pack: PackDep
) -> ThreadState:
    """Provide the thread of the URL (see :func:`load_thread`)."""
    return await load_thread(runtime, pack, thread_id)


async def provide_message_thread(
    thread_id: FromPath[str], runtime: RuntimeDep, pack: PackDep
) -> ThreadState:
    """Provide the thread of the URL for a message to send on it (see :func:`load_thread`)."""
    return await load_thread(runtime, pack, thread_id, for_message=True)


async def load_thread(
    runtime: Runtime, pack: PackScope, thread_id: str, *, for_message: bool = False
) -> ThreadState:
    """Load a thread if it belongs to the package; else raise a 404 :class:`ApiError`.

    ``for_message``: a message is sent on it next, which checks the row as it commits
    (:meth:`Runtime.thread_for_message`).
    """
    try:
        if for_message:
            thread = await runtime.thread_for_message(thread_id)
        else:
            thread = await runtime.get_thread(thread_id)
    except ThreadNotFoundError:
        thread = None
    if thread is None or thread.package != pack.package:
        raise ApiError(
            404,
            "thread_not_found",
            f"Package '{pack.package}' has no thread {thread_id!r}.",
        )
    return thread


def thread_row(thread: ThreadState) -> ThreadRow:
    """Return the stored row behind a thread state (as loaded for this request)."""
    return thread.row
