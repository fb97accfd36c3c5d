"""A JSON Schema (draft 2020-12) of recipe schema_version 1, for editors.

It describes shapes, types, enums and which keys belong to which mode; the loader checks more
(registry names, regex syntax, condition sandbox, unique cell names). Point an editor's YAML
language server at the output of ``aorta-tui recipe schema``.
"""

from __future__ import annotations

from typing import Any

from aorta_tui.recipe import keys as K

SCHEMA_ID = "https://aorta-tui.invalid/schemas/recipe-v1.json"


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _enum(values: tuple[str | None, ...], description: str, default: str | None = None
          ) -> dict[str, Any]:
    out: dict[str, Any] = {"enum": list(values), "description": description}
    if default is not None:
        out["default"] = default
    return out


def _int(description: str, minimum: int = 1, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "description": description, **extra}


def _names(description: str, min_items: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": {"type": "string", "minLength": 1},
                           "description": description}
    if min_items:
        out["minItems"] = min_items
    return out


def _obj(properties: dict[str, Any], description: str, required: tuple[str, ...] = ()
         ) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "description": description,
                           "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


_ENV_MAP = {"type": ["object", "null"], "description": "VARIABLE: \"value\" (values are strings)",
            "propertyNames": {"pattern": K.ENV_NAME_PATTERN},
            "additionalProperties": {"type": "string"}}
_JSONISH = {"description": "free-form settings of the workload"}


def recipe_json_schema() -> dict[str, Any]:
    """The schema as a dict (serialise with ``json.dumps``)."""
    collect = _collect_schema()
    props: dict[str, Any] = {
        **_run_props(_pattern_schema()),
        **_extension_props(collect),
        **_triage_props(_cell_schema(collect)),
        **_probe_props(),
    }
    assert set(props) == set(K.ALL_TOP_KEYS), set(props) ^ set(K.ALL_TOP_KEYS)
    triage_only = sorted(K.TRIAGE_KEYS)
    probe_only = sorted(K.PROBE_KEYS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "aorta-tui recipe (schema_version 1)",
        "description": "A sweep: triage mode runs a workload over cells; probe mode runs a "
                       "command over mitigation_axis x diagnostic_axis. See docs/recipes.md.",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
        "required": ["schema_version", "trials"],
        "if": {"properties": {"mode": {"const": "probe"}}, "required": ["mode"]},
        "then": {"required": ["mitigation_axis", "diagnostic_axis"],
                 "not": {"anyOf": [{"required": [k]} for k in triage_only]}},
        "else": {"required": ["workload", "steps", "cells"],
                 "not": {"anyOf": [{"required": [k]} for k in probe_only]}},
    }


def _cell_schema(collect: dict[str, Any]) -> dict[str, Any]:
    """One row of a triage recipe's ``cells``."""
    cell_name = {"type": "string", "pattern": K.CELL_NAME_PATTERN,
                 "not": {"enum": sorted(K.RESERVED_CELL_NAMES)},
                 "description": "cell name; becomes a directory name"}
    inline_env = _obj({"docker": _str("container image reference", minLength=1),
                       "env": _ENV_MAP}, "an environment in a container image", ("docker",))
    return _obj({
        "name": cell_name,
        "mitigations": _names("mitigation names (`none` = no change); "
                              "see `aorta-tui sweep list-mitigations`", 1),
        "environment": {"anyOf": [_str("registered environment name", minLength=1),
                                  inline_env, {"type": "null"}], "default": "local"},
        "extra_env": _ENV_MAP,
        "trials": {"type": ["integer", "null"], "minimum": 1, "maximum": K.MAX_TRIALS,
                   "description": "trials of this cell"},
        "steps": {"type": ["integer", "null"], "minimum": 1, "maximum": K.MAX_STEPS,
                  "description": "steps of this cell"},
        "workload_config": {"type": ["object", "null"], "description": "merged over the "
                            "recipe's workload_config", "not": {"type": "object", "required": ["steps"]}},
        "collect": collect,
    }, "one row of the matrix", ("name", "mitigations"))


def _pattern_schema() -> dict[str, Any]:
    """One entry of ``custom_patterns`` (a tier-5 log pattern)."""
    return _obj({
        "id": _str("detector id (reported as custom:<id>)", minLength=1),
        "match": _obj({"regex": _str("Python regular expression; named groups are captured",
                                     minLength=1),
                       "condition": _str("expression over the captures, exit_code, "
                                         "walltime_sec, peak_vram_mib")},
                      "what to look for", ("regex",)),
        "on_match": _enum(K.ON_MATCH, "effect when it matches", "fail"),
        "required_for_pass": {"type": "boolean", "default": False,
                              "description": "the trial fails when this pattern does NOT match"},
    }, "a tier-5 log pattern", ("id", "match"))


def _collect_schema() -> dict[str, Any]:
    """``collect``: upstream's collectors, as a list or a name -> settings map."""
    from aorta_tui.recipe.collector_names import KNOWN_COLLECTORS

    collector = {"enum": sorted(KNOWN_COLLECTORS)}
    return {"description": "upstream's collectors, run per trial where their tools exist (docs/compat.md)",
            "anyOf": [{"type": "array", "items": collector}, {"type": "null"},
                      {"type": "object", "propertyNames": collector,
                       "additionalProperties": {"type": ["object", "null"],
                                                "additionalProperties": {"type": "string"}}}]}


def _run_props(pattern: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys of both modes: version, mode, trials, stopping and detection."""
    seconds = {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": K.MAX_SECONDS}
    return {
        "schema_version": {"const": 1, "description": "recipe schema version (1)"},
        "mode": {"enum": ["triage", "probe", None], "default": "triage",
                 "description": "triage: a workload over cells; probe: a command over "
                 "mitigation_axis x diagnostic_axis"},
        "ticket": {"type": ["string", "null"], "pattern": K.CELL_NAME_PATTERN,
                   "description": "groups runs under <output>/<ticket>/"},
        "trials": _int("trials per cell", maximum=K.MAX_TRIALS),
        "confound": {"type": ["object", "null"], "additionalProperties": False,
                     "description": "speed-confound detection", "properties": {
                         "threshold": {"type": ["number", "null"], "exclusiveMinimum": 0,
                                       "maximum": K.MAX_CONFOUND_THRESHOLD, "default": 1.15},
                         "baseline_cell": {"type": ["string", "null"]}}},
        "stop_after": {"type": ["object", "null"], "additionalProperties": False,
                       "required": ["events", "max_trials"], "properties": {
                           "events": _int("stop a cell after this many events",
                                          maximum=K.MAX_TRIALS),
                           "max_trials": _int("hard cap of trials per cell",
                                              maximum=K.MAX_TRIALS),
                           "event_verdict": _enum(K.VERDICTS, "what counts as an event", "fail")},
                       "description": "collect-until-N rule"},
        "timeout_per_trial": {"type": ["number", "null"], "exclusiveMinimum": 0,
                              "maximum": K.MAX_SECONDS, "description": "seconds; the trial's process tree is killed after"},
        "custom_patterns": {"type": ["array", "null"], "items": pattern},
        "hang_window_sec": {**seconds, "default": 30, "description": "hang detection window"},
        "hang_grace_period_at_start": {"type": ["number", "null"], "minimum": 0,
                                       "maximum": K.MAX_SECONDS, "default": 60,
                                       "description": "no hang verdict before this"},
        "disable_detectors": {"type": ["array", "null"], "items": {"type": "string"},
                              "description": "tierN or <tier>:<id> tokens"},
        "disable_detector_tiers": {"type": ["array", "null"],
                                   "items": {"enum": list(K.DETECTOR_TIERS)}},
        "tier3_vram_growth": {"enum": [False, None], "default": False,
                              "description": "aorta-tui has no whole-GPU VRAM-growth detector: "
                              "only false is accepted"},
    }


def _extension_props(collect: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys of both modes: retention, ordering, tracing, collectors, executor."""
    return {
        "retain": {"type": ["object", "null"], "additionalProperties": False, "properties": {
            k: _enum(K.RETAIN_LEVELS, f"files kept for a trial with verdict {k[3:]}", "full")
            for k in sorted(K.RETAIN_KEYS)}},
        "step_time_regex": {"type": ["string", "null"],
                            "description": "regex whose first group is a step time"},
        "order": _enum((*K.ORDERS, None), "trial order (extension)", "interleaved"),
        "bytecode_cache": _enum((*K.BYTECODE_CACHE, None), "the children's bytecode cache "
                                "(extension; docs/performance.md)", "auto"),
        "seed": {"type": ["integer", "null"], "minimum": 0, "maximum": K.MAX_SEED, "default": 0,
                 "description": "seed of the trial order (extension)"},
        "trace": {"type": ["object", "null"], "additionalProperties": False,
                  "description": "eBPF probes per trial (extension)", "properties": {
                      "probes": _names("probe names"),
                      "mode": _enum(K.TRACE_MODES, "stream events or aggregate", "events")}},
        "collect": collect,
        "executor": _executor_schema(),
        "policy_axis": {"type": ["array", "null"], "uniqueItems": True,
                        "items": {"type": "string", "pattern": K.CELL_NAME_PATTERN},
                        "description": "policy names (extension)"},
    }


def _executor_schema() -> dict[str, Any]:
    """``executor``: a kind name, or a Slurm settings object (docs/slurm.md)."""
    return {"description": "where trials run (extension, docs/slurm.md)", "anyOf": [
        {"enum": [*K.EXECUTOR_KINDS, None]},
        {"type": "object", "additionalProperties": False, "properties": {
            "kind": {"enum": list(K.EXECUTOR_KINDS)},
            "partition": {"type": ["string", "null"], "pattern": K.SLURM_NAME_PATTERN},
            "account": {"type": ["string", "null"], "pattern": K.SLURM_NAME_PATTERN},
            "gres": {"type": ["string", "null"], "pattern": K.SLURM_GRES_PATTERN},
            "time": {"type": ["string", "null"], "pattern": K.SLURM_TIME_PATTERN},
            "constraint": {"type": ["string", "null"], "pattern": K.SLURM_CONSTRAINT_PATTERN},
            "extra_sbatch": {"type": "array", "items": {"type": "string", "pattern": "^--"}},
            "nodes": {"type": ["integer", "null"], "minimum": 1, "maximum": K.SLURM_MAX_NODES},
            "gpus_per_node": {"type": ["integer", "null"], "minimum": 1,
                              "maximum": K.SLURM_MAX_GPUS_PER_NODE}}}]}


def _triage_props(cell: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys of triage mode (a workload over cells)."""
    return {
        "workload": _str("registered workload (`aorta-tui sweep list-workloads`)", minLength=1),
        "steps": _int("steps per trial", maximum=K.MAX_STEPS),
        "cells": {"type": "array", "items": cell, "minItems": 1},
        "workload_config": {"type": ["object", "null"], **_JSONISH,
                            "not": {"type": "object", "required": ["steps"]}},
        "save_logs": {"enum": [True, None], "default": True,
                      "description": "trial logs are always saved: only true is accepted "
                      "(retain prunes them by verdict)"},
        "extra_env": _ENV_MAP,
        "trial_isolation": {"enum": [*K.TRIAL_ISOLATION, "auto", None], "default": "process"},
    }


def _probe_props() -> dict[str, Any]:
    """Top-level keys of probe mode (a command over mitigation_axis x diagnostic_axis)."""
    return {
        "mitigation_axis": _names("mitigation names", 1),
        "diagnostic_axis": _names("mitigation names", 1),
        "collect_paths": {"type": ["array", "null"], "items": {"type": "string"}},
        "env_passthrough_mode": _enum((*K.ENV_PASSTHROUGH, None), "how cell variables reach the "
                                      "command", "inherit"),
        "redaction": _obj({"scrub_env_keys": {**_names("globs of variable names"),
                                              "type": ["array", "null"]},
                           "scrub_paths": {"type": "boolean"},
                           "scrub_ip_addresses": {"type": "boolean"}}, "what bundles scrub"),
        "command": {"type": ["array", "null"], "items": {"type": "string"}, "minItems": 1,
                    "description": "argv of a probe run (written by aorta-tui into "
                    "recipe.resolved.yaml)"},
    }
