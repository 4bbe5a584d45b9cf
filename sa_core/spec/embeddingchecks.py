"""Checks of a pack's embedding models and of its store's configuration.

An embedding model (``define_model(..., kind="embedding")``) only turns text into vectors: it
cannot answer a prompt, summarise a compaction or stand in for a chat model, and the store's
``embedding_model`` must be one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from sa_core.spec.stores import store_config
from sa_core.spec.validatorbase import hint

if TYPE_CHECKING:
    from sa_core.spec.models import ModelDefinition
    from sa_core.spec.packs import Pack


def _models(pack: Pack, others: Iterable[Pack]) -> dict[str, ModelDefinition]:
    """The models a pack resolves by name: its own first, then other packs' (as the registry)."""
    found: dict[str, ModelDefinition] = {}
    for other in others:
        for model in other.models:
            found.setdefault(model.name, model)
    found.update({model.name: model for model in reversed(list(pack.models))})
    return found


def _chat_uses(pack: Pack) -> list[tuple[str, str]]:
    """``(where, model name)`` of every place a pack needs a chat model."""
    uses = [(f"prompt '{p.name}': model", p.model) for p in pack.prompts]
    uses += [
        (f"prompt '{p.name}': compaction.model", p.compaction.model)
        for p in pack.prompts
        if p.compaction is not None and p.compaction.model is not None
    ]
    return uses


def embedding_problems(pack: Pack, others: Iterable[Pack] = ()) -> list[str]:
    """Every misuse of an embedding model in ``pack``, and every problem of its ``store``."""
    models = _models(pack, others)
    problems: list[str] = []
    for where, name in _chat_uses(pack):
        model = models.get(name)
        if model is not None and model.kind == "embedding":
            problems.append(
                f"{where} '{name}' is an embedding model (kind='embedding'), which cannot "
                f"answer prompts; use a chat model there."
            )
    for model in pack.models:
        for fallback in model.fallbacks:
            other = models.get(fallback)
            if other is not None and other.kind != model.kind:
                problems.append(
                    f"model '{model.name}': fallback '{fallback}' is of kind '{other.kind}' but "
                    f"'{model.name}' is of kind '{model.kind}'; a fallback must be of the same "
                    f"kind."
                )
    problems += _store_problems(pack, models)
    return problems


def _store_problems(pack: Pack, models: dict[str, ModelDefinition]) -> list[str]:
    try:
        config = store_config(pack.store)
    except ValidationError as error:
        fields = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'store'}: {e['msg']}"
            for e in error.errors()
        )
        return [
            f"pack '{pack.name}': store is not a valid StoreConfig ({fields}); give "
            f"StoreConfig(embedding_model=..., fields=[...]) or a dict of those fields."
        ]
    problems: list[str] = []
    name = config.embedding_model
    if name is not None:
        model = models.get(name)
        embedding = sorted(n for n, m in models.items() if m.kind == "embedding")
        if model is None:
            problems.append(
                f"pack '{pack.name}': store.embedding_model '{name}' is not a model of the "
                f"pack{hint(name, embedding)}; define it with define_model(name='{name}', "
                f"provider=..., model=..., kind='embedding')."
            )
        elif model.kind != "embedding":
            problems.append(
                f"pack '{pack.name}': store.embedding_model '{name}' is a chat model; define "
                f"it with kind='embedding' (a model that returns vectors, such as OpenAI's "
                f"text-embedding-3-small)."
            )
    for path in config.fields or []:
        if not path or any(not part for part in path.split(".")):
            problems.append(
                f"pack '{pack.name}': store.fields entry {path!r} is not a dotted path of the "
                f"value (such as 'text' or 'author.name')."
            )
    if config.fields is not None and name is None:
        problems.append(
            f"pack '{pack.name}': store.fields is set but store.embedding_model is not; "
            f"the fields name what is embedded, so set the embedding model too."
        )
    return problems


__all__ = ["embedding_problems"]
