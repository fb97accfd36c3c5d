"""Names in a run directory: run ids, a ticket as a directory name, trial ids, and the
file names every reader and writer of a run uses.

Layout of ``<output>/<ticket>/<run-id>/``::

    run.json              what was run (recipe hash, command, aorta-tui version), atomic
    recipe.resolved.yaml  the recipe with every default filled; re-running it gives the same plan
    plan.json             cells and trials in run order
    journal.jsonl         every event, one JSON object per line, appended and flushed
    .lock                 held (flock) by the orchestrator while it runs; holds its pid
    trials/<cell>/trial-<NNN>/{stdout.log, stderr.log, result.json}
    env/host_env.json, env/<environment>.json
    matrix.json, matrix.md

Killing the orchestrator at any point loses no completed trial: a trial counts as done only
when its ``trial_finished`` line is in the journal and its ``result.json`` is on disk, and both
are written before the next trial starts. A run directory appears under its name only once
``run.json`` is in it (it is built as ``.<run-id>.creating`` and renamed), so a kill while it
is being created leaves no half-made run to resume.
"""

from __future__ import annotations

import re
import time

# Where runs go when no -o/--output is given: OUTPUT/<ticket>/<run-id>/ under the working
# directory (every command that makes runs, the TUI's $AORTA_TUI_OUTPUT default, the agent)
DEFAULT_OUTPUT = "aorta-out"
JOURNAL = "journal.jsonl"
LOCK = ".lock"
RUN_META = "run.json"
CREATING_SUFFIX = ".creating"
# A trial id is ``<cell>/trial-<NNN>`` and becomes a path under trials/: nothing else is trusted.
_TRIAL_ID = re.compile(r"^[^/\x00]+/trial-\d+$")


def new_run_id() -> str:
    # imported here: `secrets` costs ~7 ms, and this module is on the TUI's first-frame path
    # (tui/settings.py reads DEFAULT_OUTPUT) and every command's start
    import secrets

    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def safe_component(text: str) -> str:
    """Turn a ticket into a directory name (tickets are free text in recipes)."""
    out = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in text.strip())
    return out.strip(".") or "untitled"


def is_trial_id(value: object) -> bool:
    return isinstance(value, str) and bool(_TRIAL_ID.match(value)) and ".." not in value.split("/")
