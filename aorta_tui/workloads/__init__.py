"""workloads layer (see docs/architecture.md)."""
