"""policy layer (see docs/architecture.md)."""
