"""Adapters serving the hosted agents over other protocols (MCP), beside the HTTP API."""
