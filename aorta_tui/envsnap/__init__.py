"""envsnap layer (see docs/architecture.md)."""
