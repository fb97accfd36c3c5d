"""tui layer (see docs/architecture.md)."""
