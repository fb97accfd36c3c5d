"""Where the TUI finds each engine, and an honest answer when one is missing.

Screens never import engine modules directly: they ask here. Every engine is imported lazily
(the first frame must not pay for it) and a missing or half-built engine becomes
``EngineMissing`` with a sentence the screen shows instead of a crash or a stand-in.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class EngineMissing(Exception):
    """An engine module (or one of its functions) is not available in this install."""

    def __init__(self, engine: str, detail: str) -> None:
        super().__init__(f"{engine} engine not available yet ({detail})")
        self.engine = engine
        self.detail = detail


def engine_module(name: str, engine: str, *needed: str) -> ModuleType:
    """Import ``name`` and check it has ``needed`` attributes, else raise ``EngineMissing``."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise EngineMissing(engine, f"cannot import {name}: {exc}") from None
    missing = [attr for attr in needed if not hasattr(module, attr)]
    if missing:
        raise EngineMissing(engine, f"{name} lacks {', '.join(missing)}")
    return module


def envsnap() -> ModuleType:
    return engine_module("aorta_tui.envsnap", "env snapshot", "load_snapshot", "diff_snapshots")


def rundir() -> ModuleType:
    return engine_module("aorta_tui.core.rundir", "sweep", "list_runs")


def launch() -> ModuleType:
    return engine_module("aorta_tui.core.launch", "sweep", "launch_detached", "cancel_run")


def recipe() -> ModuleType:
    return engine_module("aorta_tui.core.recipe", "recipe", "check_recipe_text", "load_recipe_text")


def trace() -> ModuleType:
    return engine_module("aorta_tui.trace.session", "trace", "TraceSession")


def trace_capability() -> ModuleType:
    return engine_module("aorta_tui.trace.capability", "trace", "trace_info")


def policy() -> ModuleType:
    return engine_module("aorta_tui.policy.report", "policy", "build_report")


def available(getter: object) -> str | None:
    """``None`` when the engine behind ``getter`` imports, else the reason it does not."""
    try:
        getter()  # type: ignore[operator]
    except EngineMissing as exc:
        return str(exc)
    return None
