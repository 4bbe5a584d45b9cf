"""The tools a model is offered and how a call becomes a stored row.

Tool tables (``tools``), MCP servers (``mcp``), what a step offers (``offered``), every way a
call gets its row (``toolrows``) and the durable pause for approvals (``approvals``).
"""
