"""Which keys a recipe may hold, per mode and per block (one table, read by the validator,
the JSON Schema and the docs test)."""

from __future__ import annotations

from aorta_tui.core.numerals import MAX_CELLS as _MAX_CELLS
from aorta_tui.core.numerals import MAX_SEED as _MAX_SEED
from aorta_tui.core.numerals import MAX_STEPS as _MAX_STEPS
from aorta_tui.core.numerals import MAX_TRIALS as _MAX_TRIALS
from aorta_tui.core.numerals import SLURM_MAX_GPUS_PER_NODE as _SLURM_MAX_GPUS_PER_NODE
from aorta_tui.core.numerals import SLURM_MAX_NODES as _SLURM_MAX_NODES

# Keys valid in both modes. Upstream AORTA accepts the classifier knobs in probe mode only;
# aorta-tui classifies every trial, so they are allowed in triage recipes too (an extension).
COMMON_KEYS = frozenset({
    "schema_version", "mode", "ticket", "trials", "confound", "stop_after",
    "timeout_per_trial", "custom_patterns", "hang_window_sec", "hang_grace_period_at_start",
    "disable_detectors", "disable_detector_tiers", "tier3_vram_growth", "retain",
    "step_time_regex",
    # upstream's collectors: loaded, validated and planned; a run refuses them (exit 3)
    "collect",
    # extensions of aorta-tui
    "order", "seed", "trace", "policy_axis", "executor", "bytecode_cache",
})
TRIAGE_KEYS = frozenset({
    "workload", "steps", "cells", "workload_config", "save_logs", "extra_env", "trial_isolation",
})
PROBE_KEYS = frozenset({
    "mitigation_axis", "diagnostic_axis", "collect_paths", "env_passthrough_mode", "redaction",
    "command",  # extension: the argv of a probe run, written into recipe.resolved.yaml
})
ALL_TOP_KEYS = COMMON_KEYS | TRIAGE_KEYS | PROBE_KEYS

EXTENSION_KEYS = frozenset({"order", "seed", "trace", "policy_axis", "command", "executor",
                            "bytecode_cache"})

CELL_KEYS = frozenset({"name", "mitigations", "environment", "extra_env", "trials", "steps",
                       "workload_config", "collect"})
INLINE_ENV_KEYS = frozenset({"docker", "env"})
CONFOUND_KEYS = frozenset({"threshold", "baseline_cell"})
STOP_AFTER_KEYS = frozenset({"events", "max_trials", "event_verdict"})
PATTERN_KEYS = frozenset({"id", "match", "on_match", "required_for_pass"})
MATCH_KEYS = frozenset({"regex", "condition"})
RETAIN_KEYS = frozenset({"on_fail", "on_pass", "on_error"})
REDACTION_KEYS = frozenset({"scrub_env_keys", "scrub_paths", "scrub_ip_addresses"})
TRACE_KEYS = frozenset({"probes", "mode"})
# where trials run (docs/slurm.md): `executor: local` (default), `executor: slurm`, or a mapping
EXECUTOR_KINDS = ("local", "slurm")
EXECUTOR_KEYS = frozenset({"kind", "partition", "account", "gres", "time", "constraint",
                           "extra_sbatch", "nodes", "gpus_per_node"})
SLURM_MAX_NODES = _SLURM_MAX_NODES  # nodes, gpus_per_node (core/numerals.py: --nodes the same)
SLURM_MAX_GPUS_PER_NODE = _SLURM_MAX_GPUS_PER_NODE
SLURM_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$"  # partition, account
SLURM_GRES_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:,/=-]{0,255}$"  # gpu:1, gpu:a100:2
SLURM_CONSTRAINT_PATTERN = r"^[A-Za-z0-9_\[\]()|&*,:.!-]{1,256}$"  # a100&ib, [rack1|rack2]
# minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (sbatch --time)
SLURM_TIME_PATTERN = r"^(\d{1,6}|\d{1,6}:\d{1,2}|\d{1,4}:\d{1,2}:\d{1,2}|\d{1,4}-\d{1,2}(:\d{1,2}){0,2})$"
# sbatch options the Slurm executor sets itself (a recipe's extra_sbatch may not)
SLURM_OWN_OPTIONS = ("--array", "--output", "--error", "--export", "--parsable", "--wait",
                     "--job-name", "--open-mode", "--requeue", "--no-requeue", "--wrap",
                     "--test-only", "--hold", "--dependency")
# ... and these too when executor.nodes / gpus_per_node are given (a distributed trial)
SLURM_DISTRIBUTED_OPTIONS = ("--nodes", "--ntasks", "--ntasks-per-node", "--gpus-per-node",
                             "--gres", "--gpus")

# Upstream keys aorta-tui knows but does not run; they get a specific message, not "unknown".
UNSUPPORTED_UPSTREAM = {
    "condition": "a top-level `condition` does nothing; conditions belong inside "
                 "custom_patterns[*].match.condition",
}

ORDERS = ("interleaved", "sequential", "random")
TRIAL_ISOLATION = ("process", "exec", "in_process", "warm")
ENV_PASSTHROUGH = ("inherit", "file")
# the children's bytecode cache (core/bytecode.py): auto (when the image compiles every import)
BYTECODE_CACHE = ("auto", "on", "off")
ON_MATCH = ("fail", "warn", "info")
VERDICTS = ("fail", "pass", "error")
RETAIN_LEVELS = ("full", "summary", "log", "none")
TRACE_MODES = ("events", "aggregate")
DETECTOR_TIERS = ("tier1", "tier2", "tier3", "tier4", "tier5")
DETECTOR_PREFIXES = ("tier1", "tier2", "tier3", "tier4", "custom")

# Ranges of the numeric keys. Each bound is far past any real sweep and well inside what the
# engine can compute with (a wait of 1e30 s overflows the poll loop; a million trials is a plan
# of a million directories). Validation refuses a value outside them with the range it expects.
MAX_TRIALS = _MAX_TRIALS        # trials (per cell), cells[*].trials, stop_after.max_trials
MAX_STEPS = _MAX_STEPS          # steps, cells[*].steps (core/numerals.py: the options share them)
MAX_SECONDS = 7 * 24 * 3600     # timeout_per_trial, hang_window_sec, hang_grace_period_at_start;
                                # the worker's poll(2) takes at most 2**31 ms (24.8 days)
MAX_CONFOUND_THRESHOLD = 1000.0
MAX_SEED = _MAX_SEED  # core/numerals.py: --seed checks the same range
MAX_CELLS = _MAX_CELLS          # cells, or mitigation_axis x diagnostic_axis
MAX_PLANNED_TRIALS = 1_000_000  # the sum of every cell's trials

CELL_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
RESERVED_CELL_NAMES = frozenset({".", "..", "matrix.md", "matrix.json"})
