"""Command-line overlays on a loaded recipe, with upstream AORTA's meaning (``aorta sweep run``).

- ``--stop-after-events K`` / ``--max-trials N`` overlay the recipe's ``stop_after`` block: a
  flag replaces its half, the other half comes from the recipe; the loop must have a cap.
- ``--disable-detector TOKEN`` (repeatable) is added to the recipe's ``disable_detectors``,
  validated like it (upstream ids accepted, "did you mean" for a typo).
- ``--env-passthrough-mode inherit|file`` replaces the probe recipe's key (probe mode only).

The result is a new :class:`Recipe`: it is hashed, resolved and checked on resume like the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypedDict, TypeGuard, cast

from aorta_tui.core.errors import UsageError
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.model import EnvPassthrough, Recipe, StopAfter, TrialIsolation, Verdict


class _Changes(TypedDict, total=False):
    """The recipe's fields the flags replace."""

    stop_after: StopAfter
    disable_detectors: tuple[str, ...]
    env_passthrough_mode: EnvPassthrough


def _is_passthrough(value: str) -> TypeGuard[EnvPassthrough]:
    return value in K.ENV_PASSTHROUGH


def _is_isolation(value: str) -> TypeGuard[TrialIsolation]:
    return value in K.TRIAL_ISOLATION


def apply_overrides(
    recipe: Recipe,
    *,
    stop_after_events: int | None = None,
    max_trials: int | None = None,
    disable_detectors: Sequence[str] = (),
    env_passthrough_mode: str | None = None,
) -> Recipe:
    changes: _Changes = {}
    if stop_after_events is not None or max_trials is not None:
        changes["stop_after"] = _stop_after(recipe.stop_after, stop_after_events, max_trials)
    if disable_detectors:
        changes["disable_detectors"] = _disable(recipe, disable_detectors)
    if env_passthrough_mode is not None:
        if recipe.mode != "probe":
            raise UsageError(
                "--env-passthrough-mode applies to a probe run (a command after `--`); a "
                f"workload run ({recipe.workload}) has no command to pass variables to",
                hint="drop --env-passthrough-mode")
        if not _is_passthrough(env_passthrough_mode):
            raise UsageError(f"--env-passthrough-mode {env_passthrough_mode!r} is not a mode",
                             hint=f"use one of {', '.join(K.ENV_PASSTHROUGH)}")
        changes["env_passthrough_mode"] = env_passthrough_mode
    return dataclasses.replace(recipe, **changes) if changes else recipe


def with_bytecode_cache(recipe: Recipe, value: str) -> Recipe:
    """``--bytecode-cache``: the recipe's ``bytecode_cache``, checked like the key."""
    if value not in K.BYTECODE_CACHE:
        raise UsageError(f"--bytecode-cache {value!r} is not a mode",
                         hint=f"use one of {', '.join(K.BYTECODE_CACHE)}")
    return dataclasses.replace(recipe, bytecode_cache=value)


def with_trial_isolation(recipe: Recipe, value: str) -> Recipe:
    """``--trial-isolation``: the recipe's ``trial_isolation``, checked like the key."""
    if not _is_isolation(value):
        raise UsageError(f"--trial-isolation {value!r} is not an isolation",
                         hint=f"use one of {', '.join(K.TRIAL_ISOLATION)}")
    if recipe.mode != "triage" and value != "process":
        raise UsageError(f"--trial-isolation {value} needs a workload recipe: a probe recipe runs an "
                         "opaque command, in a fresh process per trial", hint="drop --trial-isolation")
    return dataclasses.replace(recipe, trial_isolation=value)


def _stop_after(current: StopAfter | None, events: int | None, cap: int | None) -> StopAfter:
    for flag, value in (("--stop-after-events", events), ("--max-trials", cap)):
        if value is not None and not 1 <= value <= K.MAX_TRIALS:
            raise UsageError(f"{flag} {value} is out of range", hint=f"give 1 .. {K.MAX_TRIALS}")
    events = events if events is not None else (current.events if current else None)
    cap = cap if cap is not None else (current.max_trials if current else None)
    if events is None:
        raise UsageError("--max-trials caps a stop-after loop, and there is none: the recipe has "
                         "no stop_after block", hint="add --stop-after-events K (stop each cell "
                         "after K failing trials)")
    if cap is None:
        raise UsageError("--stop-after-events needs a hard cap on trials per cell, and the "
                         "recipe's stop_after block gives none", hint="add --max-trials N")
    if cap < events:
        raise UsageError(f"--max-trials {cap} is below the event target {events}, which could "
                         "then never be reached", hint=f"give --max-trials {events} or more")
    # a loop the flags alone make counts the table's default verdict, as a stop_after block
    # written without event_verdict does
    verdict = (current.event_verdict if current
               else cast(Verdict, K.default_of("stop_after", "event_verdict", str)))
    return StopAfter(events=events, max_trials=cap, event_verdict=verdict)


def _disable(recipe: Recipe, tokens: Sequence[str]) -> tuple[str, ...]:
    from aorta_tui.recipe.validate import check_detector_tokens

    pattern_ids = {p.id for p in recipe.custom_patterns}
    out = list(recipe.disable_detectors)
    for token, norm, problem in check_detector_tokens(tokens, pattern_ids):
        if problem is not None:
            raise UsageError(f"--disable-detector {token!r}: {problem[0]}", hint=problem[1])
        if norm is not None and norm not in out:  # a token without a problem has a norm
            out.append(norm)
    return tuple(out)


__all__ = ["apply_overrides"]
