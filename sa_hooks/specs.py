"""Hook specifications: the contract between the standard-agents host and its plugins.

Two families of hooks live here.

**Registration hooks** run once when a :class:`sa_core.Runtime` starts. Each receives a
``register`` callback; call it once per thing you contribute. The host owns name collisions:
registering a name twice raises an error that names both plugins.

**Lifecycle hooks** are the nine hooks of the Standard Agents spec, prefixed ``sa_``. Global
plugins implement them to see every thread (logging, redaction); hooks defined inside a pack with
``define_hook`` run only where the active prompt (else the agent) lists their id. Both scopes share
one calling convention: the thread state first, then the subject.

Transforming hooks are *chained*: the host walks the implementations in pluggy's call order and
feeds each the previous one's output. Returning ``None`` keeps the value unchanged. Async
implementations are awaited one after another, never gathered. Implementations may accept a
subset of the arguments (pluggy's opt-in arguments), so specs only ever grow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sa_hooks import hookspec

if TYPE_CHECKING:  # names for the signatures only: at runtime this package imports pluggy alone
    from sa_core.providers import ProviderMessage
    from sa_core.spec import Message, ToolCall, ToolResult
    from sa_core.state import ThreadState

# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------


@hookspec
def sa_register_providers(register: Callable[..., None]) -> None:
    """Register LLM providers.

    Called once at runtime start. ``register(provider)`` takes a provider object (see
    ``sa_core.providers.Provider``) whose ``name`` is the string model definitions use in their
    ``provider`` field. An OpenAI-compatible vendor is a configured instance of the same class.
    """


@hookspec
def sa_register_tools(register: Callable[..., None]) -> None:
    """Register tools available to every pack by name.

    ``register(tool)`` takes a ``ToolDefinition`` (from ``define_tool``). A pack's own tool of
    the same name wins inside that pack.
    """


@hookspec
def sa_register_effects(register: Callable[..., None]) -> None:
    """Register effects available to every pack.

    ``register(effect)`` takes an ``EffectDefinition`` (from ``define_effect``).
    """


@hookspec
def sa_register_endpoints(register: Callable[..., None]) -> None:
    """Register thread endpoints mounted for every package.

    ``register(endpoint)`` takes a ``ThreadEndpointDefinition`` (from
    ``define_thread_endpoint``).
    """


@hookspec
def sa_register_packs(register: Callable[..., None]) -> None:
    """Register agent packs.

    ``register(pack)`` takes a ``Pack``. Packs installed as distributions are usually found
    through the ``sa.packs`` entry-point group instead; this hook serves plugins that build packs
    dynamically.
    """


# ---------------------------------------------------------------------------------------------
# Lifecycle: the spec's nine hooks
# ---------------------------------------------------------------------------------------------


@hookspec
def sa_filter_messages(state: ThreadState, messages: list[Message]) -> list[Message] | None:
    """Filter the persisted history before the model context is built.

    Args:
        state: the ``ThreadState`` of the thread taking a step.
        messages: the stored ``Message`` objects that will form the context, oldest first.

    Returns:
        The message list to use (possibly shorter, reordered or edited), or ``None`` to keep it.
    """


@hookspec
def sa_prefilter_llm_history(
    state: ThreadState, messages: list[ProviderMessage]
) -> list[ProviderMessage] | None:
    """Edit the provider-bound messages (system prompt included) right before a model call.

    Args:
        state: the ``ThreadState``.
        messages: ``ProviderMessage`` objects in the order they will be sent.

    Returns:
        The list to send, or ``None`` to keep it.
    """


@hookspec
def sa_before_create_message(
    state: ThreadState, message: Message
) -> Message | dict[str, Any] | None:
    """Transform a message before it is stored.

    Args:
        state: the ``ThreadState``.
        message: the ``Message`` about to be inserted.

    Returns:
        The ``Message`` (or a dict of fields to merge) to store, or ``None`` to keep it.
    """


@hookspec
def sa_after_create_message(state: ThreadState, message: Message) -> None:
    """Observe a message right after it was stored. Return values are ignored."""


@hookspec
def sa_before_update_message(
    state: ThreadState, message_id: str, updates: dict[str, Any]
) -> dict[str, Any] | None:
    """Transform the field updates about to be applied to a stored message.

    Returns:
        The updates dict to apply, or ``None`` to keep it.
    """


@hookspec
def sa_after_update_message(state: ThreadState, message: Message) -> None:
    """Observe a message right after it was updated. Return values are ignored."""


@hookspec
def sa_before_store_tool_result(
    state: ThreadState, tool_call: ToolCall, result: ToolResult
) -> ToolResult | dict[str, Any] | None:
    """Transform a tool result just before its tool message is built.

    Args:
        state: the ``ThreadState``.
        tool_call: the ``ToolCall`` being answered.
        result: the ``ToolResult``.

    Returns:
        The ``ToolResult`` (or a dict shaped like one) to store, or ``None`` to keep it.
    """


@hookspec
def sa_after_tool_call_success(
    state: ThreadState, tool_call: ToolCall, result: ToolResult
) -> ToolResult | dict[str, Any] | None:
    """Observe or replace a successful tool result.

    Returns:
        A replacement ``ToolResult`` (or dict), or ``None`` to keep the original.
    """


@hookspec
def sa_after_tool_call_failure(
    state: ThreadState, tool_call: ToolCall, result: ToolResult
) -> ToolResult | dict[str, Any] | None:
    """Observe or replace a failed tool result (an error status or a raised exception).

    Returns:
        A replacement ``ToolResult`` (or dict), or ``None`` to keep the original.
    """


LIFECYCLE_HOOKS: tuple[str, ...] = (
    "filter_messages",
    "prefilter_llm_history",
    "before_create_message",
    "after_create_message",
    "before_update_message",
    "after_update_message",
    "before_store_tool_result",
    "after_tool_call_success",
    "after_tool_call_failure",
)
"""The spec's nine hook names, without the ``sa_`` prefix, in lifecycle order."""
