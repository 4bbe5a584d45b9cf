"""The plugin host: a pluggy manager, entry-point discovery and typed hook calls.

Built by :func:`create_plugin_host` (never at import time). Registration hooks run once and
fill the host's tables; name collisions raise :class:`DuplicateNameError` naming both plugins,
and the host remembers who registered what (``sa plugins`` prints it).

pluggy is synchronous; :meth:`PluginHost.chain` walks ``hook.get_hookimpls()`` in pluggy's call
order and awaits each awaitable result one after another, feeding each implementation the
previous one's output.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

import sa_hooks
from sa_core.errors import DuplicateNameError, PluginLoadError
from sa_hooks import specs

if TYPE_CHECKING:
    from sa_core.providers import Provider
    from sa_core.spec import EffectDefinition, Pack, ThreadEndpointDefinition, ToolDefinition


@dataclass
class Registration:
    """Who registered a name."""

    kind: str
    name: str
    plugin: str


@dataclass
class PluginHost:
    """The loaded plugins and everything they registered."""

    manager: pluggy.PluginManager
    providers: dict[str, Provider] = field(default_factory=dict)
    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    effects: dict[str, EffectDefinition] = field(default_factory=dict)
    endpoints: dict[str, ThreadEndpointDefinition] = field(default_factory=dict)
    packs: list[Pack] = field(default_factory=list)
    registrations: list[Registration] = field(default_factory=list)
    _owners: dict[tuple[str, str], str] = field(default_factory=dict)

    # -- registration ---------------------------------------------------------------------

    def collect(self) -> None:
        """Run the registration hooks of every plugin, once."""
        for kind, hook_name, table in (
            ("provider", "sa_register_providers", self.providers),
            ("tool", "sa_register_tools", self.tools),
            ("effect", "sa_register_effects", self.effects),
            ("endpoint", "sa_register_endpoints", self.endpoints),
        ):
            hook = getattr(self.manager.hook, hook_name)
            for impl in hook.get_hookimpls():
                plugin_name = self.manager.get_name(impl.plugin) or repr(impl.plugin)
                impl.function(register=self._registrar(kind, table, plugin_name))
        for impl in self.manager.hook.sa_register_packs.get_hookimpls():
            plugin_name = self.manager.get_name(impl.plugin) or repr(impl.plugin)
            impl.function(register=self._pack_registrar(plugin_name))

    def _registrar(self, kind: str, table: dict[str, Any], plugin: str) -> Any:
        def register(item: Any) -> None:
            name = str(getattr(item, "name", "") or "")
            if not name:
                raise PluginLoadError(f"Plugin '{plugin}' registered a {kind} without a name.")
            self._claim(kind, name, plugin)
            table[name] = item

        return register

    def _pack_registrar(self, plugin: str) -> Any:
        def register(pack: Pack) -> None:
            self._claim("pack", pack.name, plugin)
            self.packs.append(pack)

        return register

    def _claim(self, kind: str, name: str, plugin: str) -> None:
        owner = self._owners.get((kind, name))
        if owner is not None:
            raise DuplicateNameError(
                f"{kind.capitalize()} '{name}' is registered by both '{owner}' and '{plugin}'. "
                f"Uninstall one of them, or rename the {kind} in one plugin."
            )
        self._owners[(kind, name)] = plugin
        self.registrations.append(Registration(kind, name, plugin))

    # -- lifecycle hook calls -------------------------------------------------------------

    def has_impls(self, hook: str) -> bool:
        """Whether any plugin implements lifecycle hook ``hook`` (name without ``sa_``)."""
        return bool(getattr(self.manager.hook, f"sa_{hook}").get_hookimpls())

    async def chain(self, hook: str, subject: Any, /, **kwargs: Any) -> Any:
        """Call a transforming hook, feeding each implementation the previous output.

        ``subject`` is passed under the hook's subject argument name (the last spec argument);
        ``None`` results keep the value. Implementations run in pluggy's call order.
        """
        caller = getattr(self.manager.hook, f"sa_{hook}")
        impls = caller.get_hookimpls()
        if not impls:
            return subject
        subject_name = caller.spec.argnames[-1]
        value = subject
        for impl in reversed(impls):  # get_hookimpls() is registration order; pluggy calls LIFO
            args = {**kwargs, subject_name: value}
            result = impl.function(*[args[name] for name in impl.argnames])
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                value = result
        return value

    async def notify(
        self,
        hook: str,
        /,
        *,
        on_error: Callable[[str, BaseException], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        """Call an observational hook; results are ignored.

        With ``on_error``, an implementation that raises is reported to it as ``(plugin name,
        exception)`` and the remaining implementations still run; without it the exception
        propagates.
        """
        caller = getattr(self.manager.hook, f"sa_{hook}")
        for impl in reversed(caller.get_hookimpls()):
            try:
                result = impl.function(*[kwargs[name] for name in impl.argnames])
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                if on_error is None:
                    raise
                await on_error(self.manager.get_name(impl.plugin) or repr(impl.plugin), exc)

    def plugin_names(self) -> list[str]:
        """Names of every registered plugin."""
        return sorted(name for name, _ in self.manager.list_name_plugin() if name)


def create_plugin_host(
    *, load_entrypoints: bool = True, plugins: Sequence[object] = ()
) -> PluginHost:
    """Build a plugin host.

    Args:
        load_entrypoints: load plugins from the ``sa`` entry-point group.
        plugins: extra plugin objects (modules or instances with ``@hookimpl`` methods).

    Raises:
        PluginLoadError: an entry point failed to import; the message names it.
    """
    manager = pluggy.PluginManager(sa_hooks.PROJECT)
    manager.add_hookspecs(specs)
    from sa_core import builtin_hooks

    manager.register(builtin_hooks, name="sa_builtin_hooks")
    for plugin in plugins:
        manager.register(plugin)
    if load_entrypoints:
        _load_entrypoints(manager)
    host = PluginHost(manager=manager)
    host.collect()
    return host


def _load_entrypoints(manager: pluggy.PluginManager) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=sa_hooks.PROJECT):
        if manager.get_plugin(ep.name) is not None or manager.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            dist = ep.dist.name if ep.dist is not None else "unknown distribution"
            raise PluginLoadError(
                f"Plugin entry point '{ep.name}' ({ep.value}) from {dist} failed to load: "
                f"{type(exc).__name__}: {exc}. Fix or uninstall that distribution."
            ) from exc
        manager.register(plugin, name=ep.name)


def iter_hook_names() -> Iterable[str]:
    """Every hook spec name, for docs and meta-tests."""
    return [name for name in dir(specs) if name.startswith("sa_")]
