"""Route controllers, one module per area."""
