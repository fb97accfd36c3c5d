"""hwqueue layer (see docs/architecture.md)."""
