"""The embedder of a pack's store: its ``embedding_model`` called through the provider plugin.

:func:`pack_embedder` resolves the pack's ``store.embedding_model`` (a model defined with
``kind="embedding"``) to its provider and returns a :class:`PackEmbedder`, or ``None`` when
the pack declares none. Offline runtimes (``--test-provider``) embed with the offline
provider's deterministic vectors, tagged as such, so they never mix with a real model's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sa_core.embeddings import EmbeddingRequest, Purpose, embed_with
from sa_core.offline import offline_model
from sa_core.spec import ModelDefinition
from sa_core.spec.stores import store_config

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel

Env = Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class PackEmbedder:
    """Embeds a pack store's texts with its embedding model.

    Attributes:
        model: What the vectors are tagged with (``provider:model``): a search compares only
            vectors of the same model.
        fields: The pack's ``store.fields`` (``None``: every string of a value).
        definition: The embedding model's definition.
        provider: The provider object serving it.
        env: Resolves the provider's key variables.
        offline: Whether the runtime answers offline (the model id sent is then
            ``offline:<model>``).
    """

    model: str
    fields: list[str] | None
    definition: ModelDefinition
    provider: object
    env: Env
    offline: bool = False

    async def embed(self, texts: list[str], purpose: Purpose) -> list[list[float]]:
        """One vector per text (the provider's error, a ``ProviderError``, when it fails)."""
        definition = self.definition
        request = EmbeddingRequest(
            model=offline_model(definition.model) if self.offline else definition.model,
            inputs=texts,
            purpose=purpose,
            provider_options=dict(definition.provider_options),
            env=self.env,
        )
        return await embed_with(self.provider, request)


def pack_embedder(kernel: Kernel, package: str, env: Env) -> PackEmbedder | None:
    """The embedder of ``package``'s store, or ``None`` when it declares no embedding model.

    Raises:
        DefinitionNotFoundError: the package, the model or its provider is unknown.
    """
    scope = kernel.registry.scope(package)
    config = store_config(scope.pack.store)
    if config.embedding_model is None:
        return None
    definition = scope.model(config.embedding_model)
    models = kernel.models
    provider = models.provider(definition.provider)
    name = str(getattr(provider, "name", definition.provider))
    model_id = offline_model(definition.model) if models.offline else definition.model
    return PackEmbedder(
        model=f"{name}:{model_id}",
        fields=config.fields,
        definition=definition,
        provider=provider,
        env=env,
        offline=models.offline,
    )


__all__ = ["Env", "PackEmbedder", "pack_embedder"]
