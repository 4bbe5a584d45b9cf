"""Other protocols served next to the HTTP API (each imported only when its extra is there)."""
