"""Which pack models name a provider that is not installed, or whose key is not set.

``sa validate`` reports unknown providers (with a did-you-mean) before any turn runs, and the
runtime says the same when a model call names one. ``sa models`` and ``sa serve`` use
:func:`model_keys` to say which keys are missing at start-up rather than at the first turn.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.spec import ModelDefinition, Pack


def unknown_provider_hint(name: str, known: Iterable[str]) -> str:
    """The advice for an unknown provider name: a close match, then how to install one.

    Args:
        name: the provider a model names.
        known: the provider names that are installed.

    Returns:
        ``Did you mean 'openai'? Install the plugin ...`` (the first sentence only when a known
        name is close).
    """
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    guess = f"Did you mean '{close[0]}'? " if close else ""
    return (
        f"{guess}Fix the model's provider, or install the plugin that registers provider "
        f"'{name}' (pass providers={{...}} to Runtime in code)."
    )


def unknown_provider_problems(pack: Pack, known: Iterable[str]) -> list[str]:
    """One problem per model of ``pack`` whose provider is not in ``known``.

    Args:
        pack: the pack to check.
        known: the installed provider names.

    Returns:
        Messages like ``model 'fast': provider 'opena1' is not installed. Did you mean
        'openai'? ... Installed providers: anthropic, openai.``
    """
    names: Sequence[str] = sorted(known)
    problems: list[str] = []
    for model in pack.models:
        if model.provider in names:
            continue
        installed = f" Installed providers: {', '.join(names)}." if names else ""
        problems.append(
            f"model '{model.name}': provider '{model.provider}' is not installed. "
            f"{unknown_provider_hint(model.provider, names)}{installed}"
        )
    return problems


@dataclass(frozen=True)
class ModelKey:
    """One pack model and the key variable its provider reads.

    Attributes:
        pack: the pack's name.
        model: the model definition.
        variable: the key variable (``OPENAI_API_KEY``), or None when the provider needs none.
        present: whether the variable has a value.
        installed: whether the provider is installed at all.
    """

    pack: str
    model: ModelDefinition
    variable: str | None
    present: bool
    installed: bool

    @property
    def missing(self) -> bool:
        """Whether a turn on this model would fail for want of its key (or its provider)."""
        return not self.installed or (self.variable is not None and not self.present)


def _key_variable(model: ModelDefinition, provider: Any) -> str | None:
    if provider is not None and getattr(provider, "key_required", True) is False:
        return None
    variable = model.provider_options.get("key_variable") or getattr(provider, "key_variable", None)
    return str(variable) if variable else None


def model_keys(
    packs: Iterable[Pack],
    providers: Mapping[str, Any],
    env: Callable[[str], str | None],
) -> list[ModelKey]:
    """Every model of ``packs`` with the key variable its provider needs and whether it is set.

    Args:
        packs: the packs whose models to check.
        providers: installed providers by name.
        env: looks a variable up (``os.environ.get``, or the runtime's env).

    Returns:
        One entry per model, in pack order.
    """
    found: list[ModelKey] = []
    for pack in packs:
        for model in pack.models:
            provider = providers.get(model.provider)
            variable = _key_variable(model, provider)
            present = variable is None or bool(env(variable))
            found.append(ModelKey(pack.name, model, variable, present, provider is not None))
    return found


def describe_missing(entry: ModelKey) -> str:
    """A one-line warning for a model that cannot be called.

    Reads ``support/fast (openai gpt-4o-mini): OPENAI_API_KEY is not set``.
    """
    where = f"{entry.pack}/{entry.model.name} ({entry.model.provider} {entry.model.model})"
    if not entry.installed:
        return f"{where}: provider '{entry.model.provider}' is not installed"
    return f"{where}: {entry.variable} is not set"
