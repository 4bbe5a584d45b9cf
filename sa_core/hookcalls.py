"""The typed facade the engine calls lifecycle hooks through: ``host.hooks.<hook>(state, ...)``.

One method per spec hook of :mod:`sa_hooks.specs`, with the spec's arguments and result types,
instead of string-named calls. The implementations of every hook are looked up once, when the
plugin host is built (:meth:`Hooks.rebuild`), and kept in pluggy's call order (last registered
first), so a call walks a ready tuple: with no implementation it costs a tuple check.

The builtin plugin that runs pack-defined hooks (``define_hook``) implements every lifecycle
hook; it is skipped for a thread whose package defines no hooks at all, so a pack without hooks
pays nothing for it either.

Transforming hooks are chained: each implementation receives the previous one's output and
``None`` keeps the value. Async implementations are awaited one after another, never gathered.
Observational hooks (``after_create_message``, ``after_update_message``) ignore results; with
``on_error`` a failing implementation is reported and the others still run.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from sa_hooks.specs import LIFECYCLE_HOOKS

if TYPE_CHECKING:
    from sa_core.providers import ProviderMessage
    from sa_core.spec import Message, ToolCall, ToolResult
    from sa_core.state import ThreadState

ErrorReporter = Callable[[str, BaseException], Awaitable[None]]
"""Receives ``(plugin name, exception)`` for a failing observational implementation."""


@dataclass(frozen=True, slots=True)
class HookImpl:
    """One implementation of a hook, ready to call."""

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    builtin: bool


class Hooks:
    """Typed calls of the spec's lifecycle hooks over one pluggy manager.

    Args:
        manager: the plugin manager, with every plugin already registered.
        builtin: the plugin object that runs pack-defined hooks (skipped for packages without
            hooks).
    """

    def __init__(self, manager: pluggy.PluginManager, builtin: object | None = None) -> None:
        self._manager = manager
        self._builtin = builtin
        self._impls: dict[str, tuple[HookImpl, ...]] = {}
        self._without_builtin: dict[str, tuple[HookImpl, ...] | None] = {}
        self._subjects: dict[str, str] = {}
        self.wanted_with_pack_hooks: frozenset[str] = frozenset()
        """The hooks that run an implementation for a package with hooks (see :meth:`wants_for`)."""
        self.wanted_without_pack_hooks: frozenset[str] = frozenset()
        """The hooks that run an implementation for a package without hooks."""
        self.rebuild()

    def rebuild(self) -> None:
        """Look up every hook's implementations again (after registering another plugin)."""
        table: dict[str, tuple[HookImpl, ...]] = {}
        for hook in LIFECYCLE_HOOKS:
            caller = getattr(self._manager.hook, f"sa_{hook}")
            assert caller.spec is not None
            self._subjects[hook] = caller.spec.argnames[-1]
            table[hook] = tuple(
                HookImpl(
                    plugin=self._manager.get_name(impl.plugin) or repr(impl.plugin),
                    function=impl.function,
                    argnames=tuple(impl.argnames),
                    builtin=impl.plugin is self._builtin,
                )
                for impl in reversed(caller.get_hookimpls())  # pluggy calls LIFO
            )
        self._impls = table
        self._without_builtin = {
            hook: tuple(i for i in impls if not i.builtin)
            if any(i.builtin for i in impls)
            else None
            for hook, impls in table.items()
        }
        self.wanted_with_pack_hooks = frozenset(h for h in table if self.wants_for(h, True))
        self.wanted_without_pack_hooks = frozenset(h for h in table if self.wants_for(h, False))

    def _select(self, hook: str, state: Any) -> tuple[HookImpl, ...]:
        """The implementations to run for ``state``: the builtin one only if its pack has hooks."""
        without = self._without_builtin[hook]
        if without is None or _has_pack_hooks(state):
            return self._impls[hook]
        return without

    def wants(self, hook: str, state: Any) -> bool:
        """Whether calling lifecycle hook ``hook`` for ``state`` would run any implementation.

        A caller on the hot path checks it first and skips the call (and its coroutine) when
        nothing would run; the call itself would return its subject unchanged.
        """
        return self.wants_for(hook, _has_pack_hooks(state))

    def wants_for(self, hook: str, pack_has_hooks: bool) -> bool:
        """Whether lifecycle hook ``hook`` would run for a package with or without hooks.

        :meth:`wants` for a caller that knows the package but holds no thread state (the
        engine asks before it builds the state a hook call needs).
        """
        without = self._without_builtin[hook]
        return bool(self._impls[hook] if without is None or pack_has_hooks else without)

    def impls(self, hook: str) -> tuple[HookImpl, ...]:
        """The implementations of lifecycle hook ``hook`` (no ``sa_`` prefix), in call order."""
        return self._impls[hook]

    def has_impls(self, hook: str) -> bool:
        """Whether any plugin implements lifecycle hook ``hook`` (name without ``sa_``)."""
        return bool(self._impls[hook])

    # -- the generic paths ------------------------------------------------------------------

    async def chain(self, hook: str, subject: Any, /, **kwargs: Any) -> Any:
        """Call a transforming hook by name, feeding each implementation the previous output.

        ``subject`` is passed under the hook's subject argument name (its last spec argument).
        """
        impls = self._select(hook, kwargs.get("state"))
        if not impls:
            return subject
        return await _chain(impls, self._subjects[hook], subject, kwargs)

    async def notify(self, hook: str, /, *, on_error: ErrorReporter | None, **kwargs: Any) -> None:
        """Call an observational hook by name; results are ignored."""
        impls = self._select(hook, kwargs.get("state"))
        if impls:
            await _observe(impls, kwargs, on_error)

    # -- the spec's hooks ---------------------------------------------------------------------

    async def filter_messages(self, state: ThreadState, messages: list[Message]) -> list[Message]:
        """``sa_filter_messages``: the stored history the context is built from.

        The list is copied before the first implementation sees it, so in-place edits never
        touch the caller's list.
        """
        impls = self._select("filter_messages", state)
        if not impls:
            return messages
        result: list[Message] = await _chain(impls, "messages", list(messages), {"state": state})
        return result

    async def prefilter_llm_history(
        self, state: ThreadState, messages: list[ProviderMessage]
    ) -> list[ProviderMessage]:
        """``sa_prefilter_llm_history``: the provider-bound messages right before a model call."""
        impls = self._select("prefilter_llm_history", state)
        if not impls:
            return messages
        result: list[ProviderMessage] = await _chain(impls, "messages", messages, {"state": state})
        return result

    async def before_create_message(
        self, state: ThreadState, message: Message
    ) -> Message | dict[str, Any]:
        """``sa_before_create_message``: the message to store, or a dict of fields to merge."""
        impls = self._select("before_create_message", state)
        if not impls:
            return message
        result: Message | dict[str, Any] = await _chain(impls, "message", message, {"state": state})
        return result

    async def after_create_message(
        self, state: ThreadState, message: Message, *, on_error: ErrorReporter | None = None
    ) -> None:
        """``sa_after_create_message``: observe a stored message."""
        impls = self._select("after_create_message", state)
        if impls:
            await _observe(impls, {"state": state, "message": message}, on_error)

    async def before_update_message(
        self, state: ThreadState, message_id: str, updates: dict[str, Any]
    ) -> dict[str, Any]:
        """``sa_before_update_message``: the field updates to apply to a stored message."""
        impls = self._select("before_update_message", state)
        if not impls:
            return updates
        result: dict[str, Any] = await _chain(
            impls, "updates", updates, {"state": state, "message_id": message_id}
        )
        return result

    async def after_update_message(
        self, state: ThreadState, message: Message, *, on_error: ErrorReporter | None = None
    ) -> None:
        """``sa_after_update_message``: observe an updated message."""
        impls = self._select("after_update_message", state)
        if impls:
            await _observe(impls, {"state": state, "message": message}, on_error)

    async def before_store_tool_result(
        self, state: ThreadState, tool_call: ToolCall, result: ToolResult
    ) -> ToolResult | dict[str, Any]:
        """``sa_before_store_tool_result``: the tool result its tool message is built from."""
        return await self._tool_result("before_store_tool_result", state, tool_call, result)

    async def after_tool_call_success(
        self, state: ThreadState, tool_call: ToolCall, result: ToolResult
    ) -> ToolResult | dict[str, Any]:
        """``sa_after_tool_call_success``: observe or replace a successful tool result."""
        return await self._tool_result("after_tool_call_success", state, tool_call, result)

    async def after_tool_call_failure(
        self, state: ThreadState, tool_call: ToolCall, result: ToolResult
    ) -> ToolResult | dict[str, Any]:
        """``sa_after_tool_call_failure``: observe or replace a failed tool result."""
        return await self._tool_result("after_tool_call_failure", state, tool_call, result)

    async def _tool_result(
        self, hook: str, state: ThreadState, tool_call: ToolCall, result: ToolResult
    ) -> ToolResult | dict[str, Any]:
        impls = self._select(hook, state)
        if not impls:
            return result
        value: ToolResult | dict[str, Any] = await _chain(
            impls, "result", result, {"state": state, "tool_call": tool_call}
        )
        return value


async def _chain(
    impls: tuple[HookImpl, ...], subject_name: str, value: Any, kwargs: dict[str, Any]
) -> Any:
    """Feed ``value`` through ``impls`` in order; ``None`` results keep it."""
    for impl in impls:
        args = {**kwargs, subject_name: value}
        result = impl.function(*[args[name] for name in impl.argnames])
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            value = result
    return value


async def _observe(
    impls: tuple[HookImpl, ...], kwargs: dict[str, Any], on_error: ErrorReporter | None
) -> None:
    """Call each implementation; with ``on_error`` a failure is reported and the rest still run."""
    for impl in impls:
        try:
            result = impl.function(*[kwargs[name] for name in impl.argnames])
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            if on_error is None:
                raise
            await on_error(impl.plugin, exc)


def _has_pack_hooks(state: Any) -> bool:
    """Whether the thread's package defines any hook (else the builtin plugin has nothing to do).

    Objects without a package scope (test doubles) always run the builtin plugin.
    """
    scope = getattr(state, "scope", None)
    return scope is None or bool(scope.hooks)
