"""Subagents: a child spawned, its lifecycle tools, its scoped variables, its result.

The result reaches the parent through ``subagent_report`` (across workers, ``child_wait``).
"""
