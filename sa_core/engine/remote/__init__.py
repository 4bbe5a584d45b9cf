"""Remote (A2A) agents as subagents: one exchange where a local child calls its model.

The client, the task, the exchange, the durable record, pushes, cancels and the answer.
"""
