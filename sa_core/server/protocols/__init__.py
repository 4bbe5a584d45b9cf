"""Other protocols served next to the HTTP API (MCP, A2A, OpenAI-compatible), each imported only when its extra is there."""
