"""Other protocols served next to the HTTP API (MCP, A2A, OpenAI-compatible).

Each is imported only when its extra is installed.
"""
