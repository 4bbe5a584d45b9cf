"""The builtin plugin that runs hooks defined inside packs.

A pack's ``define_hook`` definitions are the spec's hooks, not pluggy plugins. This plugin
implements the nine lifecycle specs and, for each call, runs the hook ids listed by the thread's
active prompt (else its agent) in list order, each fed the previous output. Global plugins
implement the same specs and see every thread: one calling convention, two scopes.
"""

from __future__ import annotations

import inspect
from typing import Any

from sa_hooks import hookimpl


def active_hooks(state: Any, hook: str) -> list[Any]:
    """Pack hooks of type ``hook`` the active prompt (else the agent) lists, in order.

    Args:
        state: The ``ThreadState`` of the thread.
        hook: The hook type (``filter_messages``, ...).

    Returns:
        The ``HookDefinition`` objects, in the order the prompt (or agent) lists their ids.
    """
    scope = state.scope
    prompt = state.active_prompt
    ids = prompt.hooks if prompt is not None and prompt.hooks else None
    if ids is None:
        ids = state.agent.hooks
    found = []
    for hook_id in ids:
        definition = scope.hooks.get(hook_id)
        if definition is not None and definition.hook == hook:
            found.append(definition)
    return found


async def _run(state: Any, hook: str, value: Any, *args: Any) -> Any:
    """Chain the pack hooks of type ``hook`` active on ``state``; ``value`` is the subject."""
    for definition in active_hooks(state, hook):
        result = definition.execute(state, *args, value)
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            value = result
    return value


async def _observe(state: Any, hook: str, *args: Any) -> None:
    for definition in active_hooks(state, hook):
        result = definition.execute(state, *args)
        if inspect.isawaitable(result):
            await result


@hookimpl
async def sa_filter_messages(state: Any, messages: list[Any]) -> list[Any]:
    """Run the active pack hooks of type ``filter_messages``."""
    return await _run(state, "filter_messages", messages)  # type: ignore[no-any-return]


@hookimpl
async def sa_prefilter_llm_history(state: Any, messages: list[Any]) -> list[Any]:
    """Run the active pack hooks of type ``prefilter_llm_history``."""
    return await _run(state, "prefilter_llm_history", messages)  # type: ignore[no-any-return]


@hookimpl
async def sa_before_create_message(state: Any, message: Any) -> Any:
    """Run the active pack hooks of type ``before_create_message``."""
    return await _run(state, "before_create_message", message)


@hookimpl
async def sa_after_create_message(state: Any, message: Any) -> None:
    """Run the active pack hooks of type ``after_create_message``."""
    await _observe(state, "after_create_message", message)


@hookimpl
async def sa_before_update_message(state: Any, message_id: str, updates: dict[str, Any]) -> Any:
    """Run the active pack hooks of type ``before_update_message``."""
    return await _run(state, "before_update_message", updates, message_id)


@hookimpl
async def sa_after_update_message(state: Any, message: Any) -> None:
    """Run the active pack hooks of type ``after_update_message``."""
    await _observe(state, "after_update_message", message)


@hookimpl
async def sa_before_store_tool_result(state: Any, tool_call: Any, result: Any) -> Any:
    """Run the active pack hooks of type ``before_store_tool_result``."""
    return await _run(state, "before_store_tool_result", result, tool_call)


@hookimpl
async def sa_after_tool_call_success(state: Any, tool_call: Any, result: Any) -> Any:
    """Run the active pack hooks of type ``after_tool_call_success``."""
    return await _run(state, "after_tool_call_success", result, tool_call)


@hookimpl
async def sa_after_tool_call_failure(state: Any, tool_call: Any, result: Any) -> Any:
    """Run the active pack hooks of type ``after_tool_call_failure``."""
    return await _run(state, "after_tool_call_failure", result, tool_call)
