"""Ticket bundles: run directories packed into one redacted archive with a manifest.

The engine part of ``aorta-tui bundle``; imports neither textual nor rich (docs/bundle.md).
"""
