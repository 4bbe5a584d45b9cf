"""Calling the model: the context, compaction, prompt caching, retries, output and usage.

``context`` and ``pastcontext`` (the system prompt and history), ``compaction`` (long
histories), ``modelcall``, ``retry`` and ``promptcache`` (the call, fallbacks, caching),
``structured`` (``output_schema``), ``turnsettings``, ``usage`` (roll-ups and budgets),
``embedder`` and ``caches`` (compiled prompts, tool tables).
"""
