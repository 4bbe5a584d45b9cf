"""The plugin host: a pluggy manager, entry-point discovery and typed hook calls.

Built by :func:`create_plugin_host` (never at import time). Registration hooks run once and
fill the host's tables; name collisions raise :class:`DuplicateNameError` naming both plugins,
and the host remembers who registered what (``sa plugins`` prints it).

Lifecycle hooks are called through :attr:`PluginHost.hooks`, a typed facade
(:class:`sa_core.hookcalls.Hooks`) whose implementation lists are computed once here. pluggy is
synchronous; the facade walks the implementations in pluggy's call order and awaits each
awaitable result one after another, feeding each implementation the previous one's output.

Building a host refuses two plugin mistakes with :class:`PluginLoadError`: a hook implemented as
a pluggy wrapper (``wrapper=True`` / ``hookwrapper=True``; the host calls implementations itself
and cannot run one), and a function whose name starts with ``sa_`` but matches no hook spec (a
typo that would otherwise never be called), named with the closest spec.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

import sa_hooks
from sa_core.errors import DuplicateNameError, PluginLoadError
from sa_core.hookcalls import Hooks
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
    hooks: Hooks
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
        return self.hooks.has_impls(hook)

    async def chain(self, hook: str, subject: Any, /, **kwargs: Any) -> Any:
        """Call a transforming lifecycle hook by name (prefer the typed :attr:`hooks`).

        ``subject`` is passed under the hook's subject argument name (the last spec argument);
        ``None`` results keep the value. Implementations run in pluggy's call order.
        """
        return await self.hooks.chain(hook, subject, **kwargs)

    async def notify(
        self,
        hook: str,
        /,
        *,
        on_error: Callable[[str, BaseException], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        """Call an observational lifecycle hook by name (prefer the typed :attr:`hooks`).

        With ``on_error``, an implementation that raises is reported to it as ``(plugin name,
        exception)`` and the remaining implementations still run; without it the exception
        propagates.
        """
        await self.hooks.notify(hook, on_error=on_error, **kwargs)

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
    check_plugins(manager)
    host = PluginHost(manager=manager, hooks=Hooks(manager, builtin=builtin_hooks))
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


def check_plugins(manager: pluggy.PluginManager) -> None:
    """Refuse wrapper implementations and ``sa_`` functions that match no hook spec.

    Raises:
        PluginLoadError: naming the plugin and the hook (with the closest spec for a typo).
    """
    names = list(iter_hook_names())
    known = set(names)
    for plugin_name, plugin in manager.list_name_plugin():
        label = plugin_name or repr(plugin)
        for attribute in dir(plugin):
            if not attribute.startswith("sa_") or attribute in known:
                continue
            if not inspect.isroutine(getattr(plugin, attribute, None)):
                continue
            close = difflib.get_close_matches(attribute, names, n=1, cutoff=0.6)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise PluginLoadError(
                f"Plugin '{label}' defines '{attribute}', which matches no hook spec.{hint} "
                f"Rename it to a hook listed in sa_hooks.specs, or drop the 'sa_' prefix if it "
                f"is not meant to be a hook."
            )
    for name in names:
        for impl in getattr(manager.hook, name).get_hookimpls():
            if impl.hookwrapper or impl.wrapper:
                kind = "hookwrapper=True" if impl.hookwrapper else "wrapper=True"
                label = manager.get_name(impl.plugin) or repr(impl.plugin)
                raise PluginLoadError(
                    f"Plugin '{label}' implements hook '{name}' as a wrapper ({kind}). "
                    f"The host chains hooks itself, feeding each implementation the previous "
                    f"one's output, and cannot run wrappers: drop {kind} and return the new "
                    f"value (or None to keep it)."
                )


def iter_hook_names() -> Iterable[str]:
    """Every hook spec name, for docs and meta-tests."""
    return [name for name in dir(specs) if name.startswith("sa_")]
