"""The run directory: its names, lock, journal (written, parsed, followed), creation, listing and
resume set, and RunStore, what an engine holds while it runs one. One job a module (docs/architecture.md)."""
