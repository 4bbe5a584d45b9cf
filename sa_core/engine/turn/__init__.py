"""The turn loop and its one documented cycle: a flow runs steps, a step runs tool calls.

A subprompt tool runs a nested flow: ``flow``, ``step``, ``toolcall``, ``dispatch``,
``subprompts`` and ``resume`` import one another (modules, not names).
"""
