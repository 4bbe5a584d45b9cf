"""StoreConfig: how a pack's store indexes its items (``Pack(store=...)``).

A pack that declares an embedding model gets search by meaning in its store::

    Pack(
        name="notes",
        models=[define_model(name="embed", provider="openai",
                             model="text-embedding-3-small", kind="embedding")],
        store=StoreConfig(embedding_model="embed", fields=["text", "title"]),
    )

``Pack(store={"embedding_model": "embed"})`` works too. See docs/store.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sa_core.spec.base import SpecModel


class StoreConfig(SpecModel):
    """How a pack's store indexes what is put in it.

    Attributes:
        embedding_model: A model of the pack defined with ``kind="embedding"``: every item
            put is embedded with it, and ``search(query=...)`` ranks by meaning (cosine
            similarity of the vectors). ``None``: search by words only.
        fields: Dotted paths of the value whose strings are embedded (``["text",
            "author.name"]``), joined by newlines; ``None`` embeds every string of the value.
            A ``put(..., index=[...])`` overrides them for one item, ``index=False`` skips it.
    """

    embedding_model: str | None = None
    fields: list[str] | None = None


def store_config(value: StoreConfig | Mapping[str, Any] | None) -> StoreConfig:
    """A pack's ``store`` as a :class:`StoreConfig` (``None``: the default, words only).

    Raises:
        pydantic.ValidationError: a mapping with unknown or mistyped fields.
    """
    if value is None:
        return StoreConfig()
    if isinstance(value, StoreConfig):
        return value
    return StoreConfig.model_validate(dict(value))


__all__ = ["StoreConfig", "store_config"]
