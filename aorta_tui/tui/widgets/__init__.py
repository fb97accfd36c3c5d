"""Widgets shared by the screens (histogram, bars, matrix grid)."""
