"""What recipe validation needs from the packages above it, declared here so that it imports
none of them (Hydra's shape: the interface sits below every implementation).

- A registry (recipe/checks.py's ``RegistryView``): the mitigations and environments a cell may name, handed
  in by the caller (``load_recipe(path, registry=Registry())``); without one those names are
  not checked (a recipe file read alone, the TUI editor before the registry loads).
- The collectors' option checks and the probe catalogue: the collect and trace packages
  register them as entry points of the group :data:`GROUP` (pyproject.toml), loaded the first
  time a recipe needs one, as the workloads' entry points are. So only a recipe that names
  collector options imports the collectors, and only one that traces imports the probes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from aorta_tui.core.errors import EnvironmentProblem

GROUP = "aorta_tui.recipe_checks"
COLLECTOR_OPTIONS = "collector_options"  # collect/collectors.py: option_problems
PROBE_SETS = "probe_sets"  # trace/probes: CATALOGUE, the probe sets by name

# (collector, its options) -> (option, problem, fix) for each option upstream's schema refuses
OptionCheck = Callable[[str, Mapping[str, str]], Iterable[tuple[str, str, str]]]




@functools.cache
def _registered(name: str) -> Any:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:  # an install whose metadata predates the entry point: never check less
        raise EnvironmentProblem(
            f"recipe checks: nothing is registered as {name!r} in the entry-point group "
            f"{GROUP!r}", hint="reinstall aorta-tui (pip install -e .): its entry points "
            "register the collectors' option checks and the probe catalogue")
    return found[0].load()


def collector_option_problems(name: str, options: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(option, problem, fix) for each of ``options`` that collector ``name`` refuses."""
    check: OptionCheck = _registered(COLLECTOR_OPTIONS)
    return list(check(name, options))


def probe_sets() -> Collection[str]:
    """The names of the probe sets a recipe's ``trace.probes`` may list, in catalogue order."""
    return _registered(PROBE_SETS)
