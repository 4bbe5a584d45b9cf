"""The prompt caching a model call asks for: a stable key per thread and a cache lifetime.

Every request of a thread carries the same :class:`~sa_core.providers.PromptCache` key, derived
from the thread's id alone (never from process state), so it is the same on every step and after
a restart, and a child thread, having its own id, has its own key. The lifetime is the model's
``ttl`` unless the thread may wait long before its next step: it offers a blocking subagent or a
tool that needs approval (the answer may park the thread on them), or it has running children.
Then it is the model's ``wait_ttl`` (``1h`` by default), so the prefix is still cached when the
thread resumes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sa_core.providers import CacheTTL, PromptCache

if TYPE_CHECKING:
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.spec import ModelDefinition, PromptDefinition, SubagentRegistryEntry

KEY_PREFIX = "sa-"


@functools.lru_cache(maxsize=4096)
def thread_cache_key(thread_id: str) -> str:
    """The prompt cache key of a thread: a digest of its id (32 hex digits after ``sa-``)."""
    return KEY_PREFIX + hashlib.sha256(thread_id.encode()).hexdigest()[:32]


def may_wait_long(tools: Sequence[OfferedTool], children: Sequence[SubagentRegistryEntry]) -> bool:
    """Whether a thread may wait long before its next step.

    True when it offers a tool that parks it (a blocking subagent, a tool that needs approval)
    or has children still running (their reports resume it).
    """
    for tool in tools:
        if tool.requires_approval or (tool.subagent is not None and tool.subagent.blocking):
            return True
    return any(child.status == "running" for child in children)


def prompt_cache_for(
    thread_id: str,
    model: ModelDefinition,
    prompt: PromptDefinition | None,
    *,
    waits_long: bool,
) -> PromptCache | None:
    """What a request of ``model`` asks of the provider's cache, or ``None`` when turned off.

    Args:
        thread_id: the calling thread (the key derives from it).
        model: the model definition of this attempt (its ``prompt_caching``).
        prompt: the active prompt, whose ``prompt_caching`` overrides the model's field by field.
        waits_long: whether the thread may wait long after this call (see :func:`may_wait_long`).
    """
    config = model.prompt_caching.overridden_by(prompt.prompt_caching if prompt else None)
    if not config.enabled:
        return None
    return _prompt_cache(thread_id, config.wait_ttl if waits_long else config.ttl, config.cache_key)


@functools.lru_cache(maxsize=4096)
def _prompt_cache(thread_id: str, ttl: CacheTTL, send_key: bool) -> PromptCache:
    """The (immutable) :class:`PromptCache` of a thread's requests, built once, not per call."""
    return PromptCache(key=thread_cache_key(thread_id), ttl=ttl, send_key=send_key)


__all__ = ["KEY_PREFIX", "may_wait_long", "prompt_cache_for", "thread_cache_key"]
