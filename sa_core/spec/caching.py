"""PromptCaching: how a model's requests ask the provider to cache their stable prefix."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from sa_core.spec.base import SpecModel

CacheTTL = Literal["5m", "1h"]


class PromptCaching(SpecModel):
    """Prompt caching of a model's requests; on by default.

    Set on ``define_model(prompt_caching=...)``; a prompt's ``prompt_caching`` overrides the
    fields it sets, field by field. ``True`` / ``False`` stand for ``{"enabled": ...}``.

    Attributes:
        enabled: ask the provider to cache (default ``True``). ``False`` sends no Anthropic
            ``cache_control`` breakpoints and no OpenAI ``prompt_cache_key``.
        ttl: the lifetime of the cache entries a step writes (Anthropic): ``5m`` (default) or
            ``1h``.
        wait_ttl: the lifetime used instead when the thread may wait long before its next
            step (it offers a blocking subagent or a tool that needs approval, or has running
            children): ``1h`` by default, so the prefix survives the wait.
        cache_key: send the thread's ``prompt_cache_key`` (OpenAI and compatible servers;
            default ``True``). Turn it off for a compatible server that rejects unknown fields.
    """

    enabled: bool = True
    ttl: CacheTTL = "5m"
    wait_ttl: CacheTTL = "1h"
    cache_key: bool = True

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, data: Any) -> Any:
        """Accept ``True`` / ``False`` as ``{"enabled": ...}``."""
        if isinstance(data, bool):
            return {"enabled": data}
        return data

    def overridden_by(self, other: PromptCaching | None) -> PromptCaching:
        """Return a copy with the fields ``other`` sets explicitly replacing these."""
        if other is None or not other.model_fields_set:
            return self
        return self.model_copy(update={k: getattr(other, k) for k in other.model_fields_set})


__all__ = ["CacheTTL", "PromptCaching"]
