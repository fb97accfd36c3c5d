"""Which keys a recipe may hold, per mode and per block: one table (``KEY_SPECS``) of every
key's mode, origin, JSON shape, description and default. The key sets (``COMMON_KEYS``,
``CELL_KEYS``, ...) are derived from it; the validator, the JSON Schema (``jsonschema.py``) and
the docs test read them. The ranges, enums and patterns the specs use are the constants above
the table, which the validator reads too."""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from aorta_tui.core.numerals import MAX_CELLS as _MAX_CELLS
from aorta_tui.core.numerals import MAX_SEED as _MAX_SEED
from aorta_tui.core.numerals import MAX_STEPS as _MAX_STEPS
from aorta_tui.core.numerals import MAX_TRIALS as _MAX_TRIALS
from aorta_tui.core.numerals import SLURM_MAX_GPUS_PER_NODE as _SLURM_MAX_GPUS_PER_NODE
from aorta_tui.core.numerals import SLURM_MAX_NODES as _SLURM_MAX_NODES
from aorta_tui.recipe.collector_names import KNOWN_COLLECTORS
from aorta_tui.recipe.keyspec import TOP, Block, BlockRef, KeySpec

# where trials run (docs/slurm.md): `executor: local` (default), `executor: slurm`, or a mapping
EXECUTOR_KINDS = ("local", "slurm")
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

# -- The table: one spec per key of each block ---------------------------------------------------
# Each key's name, mode, origin, JSON shape, description and default are written here once; the
# key sets below, the JSON Schema (jsonschema.py) and the tests read them from this table.
MODES = ("triage", "probe")


def _int(maximum: int, *, minimum: int = 1, null: bool = False) -> dict[str, object]:
    return {"type": ["integer", "null"] if null else "integer", "minimum": minimum,
            "maximum": maximum}


def _seconds(*, zero: bool) -> dict[str, object]:
    low: dict[str, object] = {"minimum": 0} if zero else {"exclusiveMinimum": 0}
    return {"type": ["number", "null"], **low, "maximum": MAX_SECONDS}


def _names(min_items: int = 0) -> dict[str, object]:
    out: dict[str, object] = {"type": "array", "items": {"type": "string", "minLength": 1}}
    if min_items:
        out["minItems"] = min_items
    return out


def _collect_shape() -> dict[str, object]:
    """``collect``: upstream's collectors, as a list or a name -> settings map."""
    collector = {"enum": sorted(KNOWN_COLLECTORS)}
    return {"anyOf": [{"type": "array", "items": collector}, {"type": "null"},
                      {"type": "object", "propertyNames": collector,
                       "additionalProperties": {"type": ["object", "null"],
                                                "additionalProperties": {"type": "string"}}}]}


_ENV_MAP: dict[str, object] = {"type": ["object", "null"],
                               "propertyNames": {"pattern": ENV_NAME_PATTERN},
                               "additionalProperties": {"type": "string"}}
_ENV_MAP_TEXT = "VARIABLE: \"value\" (values are strings)"
_COLLECT_TEXT = "upstream's collectors, run per trial where their tools exist (docs/compat.md)"
_NO_STEPS = {"type": "object", "required": ["steps"]}  # steps is a key of its own

BLOCKS: dict[str, Block] = {b.name: b for b in (
    Block(TOP, "object"),
    Block("confound", ("object", "null")),
    Block("stop_after", ("object", "null")),
    Block("pattern", "object", "a tier-5 log pattern"),
    Block("match", "object", "what to look for"),
    Block("retain", ("object", "null")),
    Block("trace", ("object", "null")),
    Block("executor", "object"),
    Block("cell", "object", "one row of the matrix"),
    Block("inline_env", "object", "an environment in a container image"),
    Block("redaction", "object"),
)}

# Top-level keys of both modes. Upstream AORTA accepts the classifier knobs (timeout_per_trial
# .. step_time_regex) in probe mode only; aorta-tui classifies every trial, so they are allowed
# in triage recipes too (an extension of where they stand, not of the keys).
_COMMON = (
    KeySpec("schema_version", {"const": 1}, description="recipe schema version (1)",
            required=True),
    KeySpec("mode", {"enum": [*MODES, None]}, default="triage",
            description="triage: a workload over cells; probe: a command over mitigation_axis "
                        "x diagnostic_axis"),
    KeySpec("ticket", {"type": ["string", "null"], "pattern": CELL_NAME_PATTERN},
            description="groups runs under <output>/<ticket>/"),
    KeySpec("trials", _int(MAX_TRIALS), description="trials per cell", required=True),
    KeySpec("confound", BlockRef("confound"), description="speed-confound detection"),
    KeySpec("stop_after", BlockRef("stop_after"), description="collect-until-N rule"),
    KeySpec("timeout_per_trial", _seconds(zero=False),
            description="seconds; the trial's process tree is killed after"),
    KeySpec("custom_patterns", {"type": ["array", "null"], "items": BlockRef("pattern")}),
    KeySpec("hang_window_sec", _seconds(zero=False), default=30,
            description="hang detection window"),
    KeySpec("hang_grace_period_at_start", _seconds(zero=True), default=60,
            description="no hang verdict before this"),
    KeySpec("disable_detectors", {"type": ["array", "null"], "items": {"type": "string"}},
            description="tierN or <tier>:<id> tokens"),
    # merged into Recipe.disable_detectors (as `tierN` tokens)
    KeySpec("disable_detector_tiers",
            {"type": ["array", "null"], "items": {"enum": list(DETECTOR_TIERS)}},
            model_field=False),
    KeySpec("tier3_vram_growth", {"enum": [False, None]}, default=False,
            description="aorta-tui has no whole-GPU VRAM-growth detector: only false is "
                        "accepted"),
    KeySpec("retain", BlockRef("retain")),
    KeySpec("step_time_regex", {"type": ["string", "null"]},
            description="regex whose first group is a step time"),
    # upstream's collectors: loaded, validated and planned (Recipe.collect and collect_options)
    KeySpec("collect", _collect_shape(), description=_COLLECT_TEXT),
    KeySpec("order", {"enum": [*ORDERS, None]}, origin="extension", default="interleaved",
            description="trial order (extension)"),
    KeySpec("seed", _int(MAX_SEED, minimum=0, null=True), origin="extension", default=0,
            description="seed of the trial order (extension)"),
    KeySpec("trace", BlockRef("trace"), origin="extension",
            description="eBPF probes per trial (extension)"),
    KeySpec("policy_axis", {"type": ["array", "null"], "uniqueItems": True,
                            "items": {"type": "string", "pattern": CELL_NAME_PATTERN}},
            origin="extension", description="policy names (extension)"),
    KeySpec("executor", {"anyOf": [{"enum": [*EXECUTOR_KINDS, None]}, BlockRef("executor")]},
            origin="extension", description="where trials run (extension, docs/slurm.md)"),
    # true/false: YAML 1.1 (PyYAML, the loader) reads a bare `on`/`off` as a boolean
    KeySpec("bytecode_cache", {"enum": [*BYTECODE_CACHE, True, False, None]}, origin="extension",
            default="auto",
            description="the children's bytecode cache (extension; docs/performance.md): auto, on "
                        "or off (a bare on/off, YAML's booleans, reads as the word)"),
)

_TRIAGE = tuple(replace(s, mode="triage") for s in (
    KeySpec("workload", {"type": "string", "minLength": 1}, required=True,
            description="registered workload (`aorta-tui sweep list-workloads`)"),
    KeySpec("steps", _int(MAX_STEPS), description="steps per trial", required=True),
    KeySpec("cells", {"type": "array", "items": BlockRef("cell"), "minItems": 1},
            required=True),
    KeySpec("workload_config", {"type": ["object", "null"], "not": _NO_STEPS},
            description="free-form settings of the workload"),
    KeySpec("save_logs", {"enum": [True, None]}, default=True,
            description="trial logs are always saved: only true is accepted (retain prunes "
                        "them by verdict)"),
    KeySpec("extra_env", _ENV_MAP, description=_ENV_MAP_TEXT),
    # upstream's `auto` is read as `process`
    KeySpec("trial_isolation", {"enum": [*TRIAL_ISOLATION, "auto", None]}, default="process"),
))

_PROBE = (
    KeySpec("mitigation_axis", _names(1), mode="probe", description="mitigation names",
            required=True),
    KeySpec("diagnostic_axis", _names(1), mode="probe", description="mitigation names",
            required=True),
    KeySpec("collect_paths", {"type": ["array", "null"], "items": {"type": "string"}},
            mode="probe"),
    KeySpec("env_passthrough_mode", {"enum": [*ENV_PASSTHROUGH, None]}, mode="probe",
            default="inherit", description="how cell variables reach the command"),
    KeySpec("redaction", BlockRef("redaction"), mode="probe",
            description="what bundles scrub"),
    # the argv of a probe run, written into recipe.resolved.yaml
    KeySpec("command", {"type": ["array", "null"], "items": {"type": "string"}, "minItems": 1},
            mode="probe", origin="extension",
            description="argv of a probe run (written by aorta-tui into recipe.resolved.yaml)"),
)

_CELL = tuple(replace(s, block="cell") for s in (
    KeySpec("name", {"type": "string", "pattern": CELL_NAME_PATTERN,
                     "not": {"enum": sorted(RESERVED_CELL_NAMES)}},
            description="cell name; becomes a directory name", required=True),
    KeySpec("mitigations", _names(1), required=True,
            description="mitigation names (`none` = no change); see `aorta-tui sweep "
                        "list-mitigations`"),
    # optional here (upstream requires it): a registered name or an inline container
    KeySpec("environment", {"anyOf": [
        {"type": "string", "description": "registered environment name", "minLength": 1},
        BlockRef("inline_env"), {"type": "null"}]}, default="local"),
    KeySpec("extra_env", _ENV_MAP, description=_ENV_MAP_TEXT),
    KeySpec("trials", _int(MAX_TRIALS, null=True), description="trials of this cell"),
    KeySpec("steps", _int(MAX_STEPS, null=True), description="steps of this cell"),
    KeySpec("workload_config", {"type": ["object", "null"], "not": _NO_STEPS},
            description="merged over the recipe's workload_config"),
    KeySpec("collect", _collect_shape(), description=_COLLECT_TEXT),
))

_BLOCK_KEYS = (
    KeySpec("docker", {"type": "string", "minLength": 1}, block="inline_env", required=True,
            description="container image reference"),
    KeySpec("env", _ENV_MAP, block="inline_env", description=_ENV_MAP_TEXT),
    KeySpec("threshold", {"type": ["number", "null"], "exclusiveMinimum": 0,
                          "maximum": MAX_CONFOUND_THRESHOLD}, block="confound", default=1.15),
    KeySpec("baseline_cell", {"type": ["string", "null"]}, block="confound"),
    KeySpec("events", _int(MAX_TRIALS), block="stop_after", required=True,
            description="stop a cell after this many events"),
    KeySpec("max_trials", _int(MAX_TRIALS), block="stop_after", required=True,
            description="hard cap of trials per cell"),
    KeySpec("event_verdict", {"enum": list(VERDICTS)}, block="stop_after", default="fail",
            description="what counts as an event"),
    KeySpec("id", {"type": "string", "minLength": 1}, block="pattern", required=True,
            description="detector id (reported as custom:<id>)"),
    # its keys are CustomPattern's fields regex and condition
    KeySpec("match", BlockRef("match"), block="pattern", required=True, model_field=False),
    KeySpec("on_match", {"enum": list(ON_MATCH)}, block="pattern", default="fail",
            description="effect when it matches"),
    KeySpec("required_for_pass", {"type": "boolean"}, block="pattern", default=False,
            description="the trial fails when this pattern does NOT match"),
    KeySpec("regex", {"type": "string", "minLength": 1}, block="match", required=True,
            description="Python regular expression; named groups are captured"),
    KeySpec("condition", {"type": "string"}, block="match",
            description="expression over the captures, exit_code, walltime_sec, "
                        "peak_vram_mib"),
    *(KeySpec(k, {"enum": list(RETAIN_LEVELS)}, block="retain", default="full",
              description=f"files kept for a trial with verdict {k[3:]}")
      for k in ("on_fail", "on_pass", "on_error")),
    KeySpec("scrub_env_keys", {**_names(), "type": ["array", "null"]}, block="redaction",
            description="globs of variable names"),
    KeySpec("scrub_paths", {"type": "boolean"}, block="redaction", default=False),
    KeySpec("scrub_ip_addresses", {"type": "boolean"}, block="redaction", default=False),
)

# the extensions' own blocks: every key in them is aorta-tui's
_EXTENSION_BLOCK_KEYS = tuple(replace(s, origin="extension") for s in (
    KeySpec("probes", _names(), block="trace", description="probe names"),
    KeySpec("mode", {"enum": list(TRACE_MODES)}, block="trace", default="events",
            description="stream events or aggregate"),
    KeySpec("kind", {"enum": list(EXECUTOR_KINDS)}, block="executor", default="local"),
    *(KeySpec(k, {"type": ["string", "null"], "pattern": pattern}, block="executor")
      for k, pattern in (("partition", SLURM_NAME_PATTERN), ("account", SLURM_NAME_PATTERN),
                         ("gres", SLURM_GRES_PATTERN), ("time", SLURM_TIME_PATTERN),
                         ("constraint", SLURM_CONSTRAINT_PATTERN))),
    KeySpec("extra_sbatch", {"type": "array", "items": {"type": "string", "pattern": "^--"}},
            block="executor"),
    KeySpec("nodes", _int(SLURM_MAX_NODES, null=True), block="executor"),
    KeySpec("gpus_per_node", _int(SLURM_MAX_GPUS_PER_NODE, null=True), block="executor"),
))

KEY_SPECS: tuple[KeySpec, ...] = (*_COMMON, *_TRIAGE, *_PROBE, *_CELL, *_BLOCK_KEYS,
                                  *_EXTENSION_BLOCK_KEYS)


def specs_of(block: str, *, mode: str | None = None) -> tuple[KeySpec, ...]:
    """The specs of ``block`` in table order (at the top level, of ``mode`` only if given)."""
    return tuple(s for s in KEY_SPECS if s.block == block and mode in (None, s.mode))


def keys_of(block: str, *, mode: str | None = None) -> frozenset[str]:
    return frozenset(s.name for s in specs_of(block, mode=mode))


# -- The key sets every reader imports, derived from the table ----------------------------------
COMMON_KEYS = keys_of(TOP, mode="both")
TRIAGE_KEYS = keys_of(TOP, mode="triage")
PROBE_KEYS = keys_of(TOP, mode="probe")
ALL_TOP_KEYS = COMMON_KEYS | TRIAGE_KEYS | PROBE_KEYS
EXTENSION_KEYS = frozenset(s.name for s in specs_of(TOP) if s.origin == "extension")

CELL_KEYS = keys_of("cell")
INLINE_ENV_KEYS = keys_of("inline_env")
CONFOUND_KEYS = keys_of("confound")
STOP_AFTER_KEYS = keys_of("stop_after")
PATTERN_KEYS = keys_of("pattern")
MATCH_KEYS = keys_of("match")
RETAIN_KEYS = keys_of("retain")
REDACTION_KEYS = keys_of("redaction")
TRACE_KEYS = keys_of("trace")
EXECUTOR_KEYS = keys_of("executor")


# -- One key of the table, by block and name: how a reader names a key --------------------------
# The validator reads each key's path (for its messages), its default and its name in the
# mapping through these, so a key is spelled in the table and looked up everywhere else: a key
# the table lacks is a KeyError in the reader (tests/recipe/test_recipe_key_lookups.py finds
# every such lookup and checks it resolves, also those only an error path reaches).
_BY_PLACE: dict[tuple[str, str], KeySpec] = {(s.block, s.name): s for s in KEY_SPECS}
# blocks written under the top-level key of their name (`stop_after: {...}`); the others are
# entries of a list (a cell, a custom pattern) or inside one, and their keys' paths start there
TOP_BLOCKS = frozenset(s.name for s in specs_of(TOP) if s.name in BLOCKS)

_T = TypeVar("_T")


def spec(block: str, name: str) -> KeySpec:
    """The spec of ``block``'s key ``name`` (KeyError for a key the table lacks)."""
    return _BY_PLACE[(block, name)]


def specs(block: str, *names: str) -> tuple[KeySpec, ...]:
    """The specs of ``block``'s keys ``names``, in that order."""
    return tuple(spec(block, n) for n in names)


def path(block: str, name: str) -> str:
    """The key's path in the validator's messages: ``trials`` at the top, ``stop_after.events``
    in a block written under a top-level key. A key of a list's entry (``cells[0].name``) has
    no path of its own: its reader joins the entry's path and the name (``KeySpec.at``)."""
    if block != TOP and block not in TOP_BLOCKS:
        raise ValueError(f"{block!r} keys stand in a list's entries: join the entry's path")
    return spec(block, name).at(block if block != TOP else "")


def default_of(block: str, name: str, kind: type[_T]) -> _T:
    """The table's default of ``block``'s key ``name``, as a ``kind``. A whole-number default of
    a float key (``hang_window_sec: 30``, as the schema writes it) reads as the float the model
    holds (30.0), so a recipe loads as it did when the loader wrote the literal."""
    value = spec(block, name).default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise TypeError(f"the default of {block}.{name} is {value!r}, not {kind.__name__}")
    return value
