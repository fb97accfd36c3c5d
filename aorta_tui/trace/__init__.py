"""trace layer (see docs/architecture.md)."""
