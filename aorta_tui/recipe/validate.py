"""Turn parsed recipe data into a :class:`Recipe`, collecting every problem on the way.

Each check records a :class:`RecipeIssue` (position, key path, what was expected, how to fix
it) and carries on, so one run reports all the problems of a recipe, not only the first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aorta_tui.core.errors import AortaError
from aorta_tui.core.inputs import clip_for_message
from aorta_tui.core.suggest import did_you_mean, phrase
from aorta_tui.core.suggest import nearest as _suggest
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.checks import (
    BAD,
    Bad,
    RecipeIssue,
    Validator,
    docker_image_problem,
    type_name,
)
from aorta_tui.recipe.keyspec import TOP, KeySpec
from aorta_tui.recipe.loader import Marks, child_path
from aorta_tui.recipe.model import (
    CONDITION_VARIABLES,
    SCHEMA_VERSION,
    CellSpec,
    Confound,
    CustomPattern,
    ExecutorSpec,
    Mode,
    OnMatch,
    Order,
    Recipe,
    Redaction,
    Retain,
    StopAfter,
    TraceMode,
    TraceSpec,
    Verdict,
)
from aorta_tui.recipe.upstream_workloads import not_carried

if TYPE_CHECKING:
    from aorta_tui.recipe.checks import RegistryView

_CELL_NAME_RE = re.compile(K.CELL_NAME_PATTERN)
_PROBE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


# --------------------------------------------------------------------------------------------
def build_recipe(data: object, marks: Marks, *, source: str, source_path: Path | None,
                 registry: RegistryView | None) -> tuple[Recipe | None, list[RecipeIssue], int]:
    """Validate ``data``; return the recipe (or None), the issues found (at most
    ``MAX_ISSUES``) and how many more there were."""
    v = Validator(marks, source, registry)
    recipe = _build(v, data, source, source_path)
    if v.issues:
        return None, v.issues, v.more
    return recipe, [], 0


_MINIMAL = ("start from: `schema_version: 1`, `workload: gpu_smoke`, `trials: 2`, `steps: 10`, "
            "`cells: [{name: baseline-local, mitigations: [none]}]` (see recipes/examples/)")


def _build(v: Validator, data: object, source: str, source_path: Path | None) -> Recipe | None:
    if data is None:
        v.issue("", "the recipe is empty", _MINIMAL)
        return None
    if not isinstance(data, dict):
        v.issue("", f"the top level of a recipe must be a mapping of keys, got "
                f"{type_name(data)}", _MINIMAL)
        return None

    # schema_version first: a recipe of another version is not worth checking further.
    if not _check_version(v, data):
        return None
    mode = _mode(v, data)
    if mode is None:
        return None
    _check_keys(v, data, mode)

    common = _common_fields(v, data) | _extension_fields(v, data)
    trials, stop_after = common["trials"], common["stop_after"]
    parts = _triage(v, data) if mode == "triage" else _probe(v, data)
    cells = parts.get("cells", ())
    _check_plan_size(v, cells, trials, stop_after, mode)

    # stop_after with per-cell trials: upstream runs every cell up to max_trials (the cells'
    # trials are not used); so does the plan here, and `recipe validate` says so.

    confound = _confound(v, data.get("confound"), cells, mode, _written_cell_names(data, mode))

    if v.issues or confound is BAD:  # BAD only with an issue recorded
        return None
    return Recipe(
        schema_version=SCHEMA_VERSION, mode=mode, confound=confound, source_path=source_path,
        source_label=source, locations=dict(v.marks.values), key_locations=dict(v.marks.keys),
        **common, **parts,
    )


def _check_version(v: Validator, data: dict[str, Any]) -> bool:
    """Check schema_version; False when it names another version (stop checking there)."""
    key = K.spec(TOP, "schema_version").name
    if key not in data:
        v.issue("", f"required key {key!r} is missing", f"add `{key}: {SCHEMA_VERSION}` at the top")
        return True
    version = data[key]
    if isinstance(version, bool) or not isinstance(version, int):
        v.issue(key, f"expected an integer, got {type_name(version)} ({version!r})",
                f"write `{key}: {SCHEMA_VERSION}`")
    elif version != SCHEMA_VERSION:
        v.issue(key, f"unsupported {key} {version}; this aorta-tui reads {key} "
                f"{SCHEMA_VERSION}", f"write `{key}: {SCHEMA_VERSION}` and check the keys "
                "against docs/recipes.md")
        return False
    return True


def _mode(v: Validator, data: dict[str, Any]) -> Mode | None:
    """The recipe's mode (triage or probe); None, with an issue, for any other."""
    key = K.spec(TOP, "mode")
    mode = data.get(key.name)
    if mode is None:  # null is the default, as leaving the key out is
        mode = cast(Mode, K.default_of(TOP, key.name, str))
    if mode == "sanitizer":  # upstream's separate loader too: collect/sanitizer.py
        v.issue(key.name, "a `mode: sanitizer` recipe is not a triage/probe plan",
                "run it with `aorta-tui sweep run --recipe FILE` (collect/sanitizer.py reads it)")
        return None
    if mode not in K.MODES:
        v.choice(key.name, mode, K.MODES)
        return None
    return mode


def _check_keys(v: Validator, data: dict[str, Any], mode: Mode) -> None:
    """Unknown keys, with a hint for the other mode's keys and upstream's unsupported ones."""
    own = K.COMMON_KEYS | (K.TRIAGE_KEYS if mode == "triage" else K.PROBE_KEYS)
    other_hint = {}
    for k in K.PROBE_KEYS if mode == "triage" else K.TRIAGE_KEYS:
        other_hint[k] = (f"{k!r} is a probe-mode key: add `mode: probe` or remove it"
                         if mode == "triage" else
                         f"{k!r} is a triage-mode key; a probe recipe builds its cells from "
                         "mitigation_axis x diagnostic_axis and runs the command after `--`: "
                         "remove it or drop `mode: probe`")
    other_hint.update(K.UNSUPPORTED_UPSTREAM)
    v.mapping("", data, own, extra_hint=other_hint)


def _common_fields(v: Validator, data: dict[str, Any]) -> dict[str, Any]:
    """Keys of both modes: trials, stopping, timeouts and detection (Recipe keyword names)."""
    get = data.get
    ticket = get("ticket")
    if ticket is not None:
        ticket = _safe_component(v, "ticket", ticket, what="ticket")
    trials: int | Bad = BAD
    if v.require("", data, "trials", "add `trials: 3` (trials per cell)"):
        trials = v.integer("trials", data["trials"], minimum=1, maximum=K.MAX_TRIALS)

    stop_after = _stop_after(v, get("stop_after"))
    timeout = get("timeout_per_trial")
    if timeout is not None:
        timeout = v.number("timeout_per_trial", timeout, above=0, at_most=K.MAX_SECONDS,
                           unit=" seconds")
    hang_window = _seconds(v, data, "hang_window_sec", allow_zero=False)
    hang_grace = _seconds(v, data, "hang_grace_period_at_start", allow_zero=True)

    vram = _only_value(v, data, "tier3_vram_growth",
                       "tier3_vram_growth: true asks for upstream's whole-GPU VRAM-growth "
                       "detector (tier3:vram_growth), which aorta-tui does not have",
                       "remove the key (false is what aorta-tui does); each trial's own peak "
                       "GPU memory is in result.json, and a custom pattern's condition can "
                       "test peak_vram_mib")
    retain = _retain(v, get("retain"))
    step_re = get("step_time_regex")
    if step_re is not None:
        step_re = _regex(v, "step_time_regex", step_re)
    patterns = _custom_patterns(v, get("custom_patterns"))
    pattern_ids = {p.id for p in patterns} if patterns is not BAD else set()
    disable = _disable_detectors(v, get("disable_detectors"), get("disable_detector_tiers"),
                                 pattern_ids)
    return dict(
        ticket=ticket, trials=trials, stop_after=stop_after, timeout_per_trial=timeout,
        custom_patterns=patterns, hang_window_sec=hang_window,
        hang_grace_period_at_start=hang_grace, disable_detectors=disable,
        tier3_vram_growth=vram, retain=retain, step_time_regex=step_re,
    )


def _extension_fields(v: Validator, data: dict[str, Any]) -> dict[str, Any]:
    """Keys of both modes that upstream lacks: order, seed, trace, collectors, executor."""
    get = data.get
    written_order = get("order")
    order = (cast(Order, K.default_of(TOP, "order", str)) if written_order is None
             else cast("Order | Bad", v.choice("order", written_order, K.ORDERS)))
    seed = get("seed")
    seed = (K.default_of(TOP, "seed", int) if seed is None
            else v.integer("seed", seed, minimum=0, maximum=K.MAX_SEED))
    trace = _trace(v, get("trace"))
    collect, collect_options = _collect(v, "collect", get("collect"))
    policy_axis = _policy_axis(v, get("policy_axis"))
    executor = _executor(v, get("executor"))
    bytecode = get("bytecode_cache")
    if isinstance(bytecode, bool):  # YAML 1.1 reads a bare `on`/`off` as a boolean: the word written
        bytecode = "on" if bytecode else "off"
    bytecode = (K.default_of(TOP, "bytecode_cache", str) if bytecode is None
                else v.choice("bytecode_cache", bytecode, K.BYTECODE_CACHE))
    return dict(
        order=order, seed=seed, trace=trace, policy_axis=policy_axis, collect=collect,
        collect_options=collect_options, executor=executor, bytecode_cache=bytecode,
    )


def _check_plan_size(v: Validator, cells: tuple[CellSpec, ...], trials: int | Bad,
                     stop_after: StopAfter | Bad | None, mode: str) -> None:
    """Refuse plans too big to run: every trial is a directory, a journal line, a process."""
    where = "cells" if mode == "triage" else "mitigation_axis"
    if len(cells) > K.MAX_CELLS:
        v.issue(where, f"the recipe has {len(cells)} cells; at most {K.MAX_CELLS}",
                "split the sweep into several recipes")
        return
    if trials is BAD or stop_after is BAD:
        return
    per_cell = stop_after.max_trials if stop_after is not None else None
    total = sum(per_cell or c.trials or trials for c in cells)
    if total > K.MAX_PLANNED_TRIALS:
        v.issue("trials", f"the plan has {total} trials in all ({len(cells)} cells); at most "
                f"{K.MAX_PLANNED_TRIALS}", "use fewer trials or fewer cells per recipe")


def _only_value(v: Validator, data: dict[str, Any], name: str, refused: str, fix: str
                ) -> bool | Bad:
    """A top-level boolean key aorta-tui can honour one way only, its default (the table's):
    that value (or absence) is accepted and means what it says; the other is refused, never
    accepted and ignored."""
    honoured = K.default_of(TOP, name, bool)
    raw, path = data.get(name), K.path(TOP, name)
    if raw is None:
        return honoured
    value = v.boolean(path, raw)
    if value is BAD or value == honoured:
        return value
    return v.issue(path, refused, fix)


def _safe_component(v: Validator, path: str, value: object, *, what: str) -> str | Bad:
    if not isinstance(value, str):
        return v.issue(path, f"the {what} must be a string, got {type_name(value)} ({value!r})",
                       v.quote_hint(path, value) or "quote it")
    if value in K.RESERVED_CELL_NAMES or not _CELL_NAME_RE.fullmatch(value):
        return v.issue(path, f"{value!r} cannot be used as the {what}: it becomes a directory "
                       "name, so it must be 1-100 letters, digits, '.', '_' or '-', start with "
                       "a letter, digit or '_', and not be '.', '..', matrix.md or matrix.json",
                       f"for example {_safe_example(value, what)!r}")
    return value


def _safe_example(value: str, what: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip(".-")[:100]
    if cleaned and cleaned not in K.RESERVED_CELL_NAMES:
        return cleaned
    return "TICKET-123" if what == "ticket" else "baseline-local"


def _seconds(v: Validator, data: dict[str, Any], name: str, *, allow_zero: bool
             ) -> float | Bad:
    """The top-level key ``name`` in seconds; left out or null, the table's default."""
    value, path = data.get(name), K.path(TOP, name)
    if value is None:
        return K.default_of(TOP, name, float)
    if allow_zero:
        return v.number(path, value, at_least=0, at_most=K.MAX_SECONDS, unit=" seconds")
    return v.number(path, value, above=0, at_most=K.MAX_SECONDS, unit=" seconds")


def _stop_after(v: Validator, raw: object) -> StopAfter | Bad | None:
    if raw is None:
        return None
    if v.mapping("stop_after", raw, K.STOP_AFTER_KEYS) is BAD or not isinstance(raw, dict):
        return BAD
    events_k, most_k, verdict_k = K.specs("stop_after", "events", "max_trials", "event_verdict")
    ok = True
    for key in (events_k.name, most_k.name):
        if key not in raw:
            v.issue("stop_after", f"required key {key!r} is missing",
                    "write `stop_after: {events: 1, max_trials: 20}` (max_trials bounds the loop)")
            ok = False
    if not ok:
        return BAD
    events = v.integer(K.path("stop_after", events_k.name), raw[events_k.name], minimum=1,
                       maximum=K.MAX_TRIALS)
    max_trials = v.integer(K.path("stop_after", most_k.name), raw[most_k.name], minimum=1,
                           maximum=K.MAX_TRIALS)
    verdict = raw.get(verdict_k.name, K.default_of("stop_after", verdict_k.name, str))
    verdict = v.choice(K.path("stop_after", verdict_k.name), verdict, K.VERDICTS)
    if events is BAD or max_trials is BAD or verdict is BAD:
        return BAD
    if max_trials < events:
        return v.issue(K.path("stop_after", most_k.name), f"max_trials ({max_trials}) is below "
                       f"events ({events}), so the target could never be reached",
                       f"set max_trials to at least {events}")
    return StopAfter(events=events, max_trials=max_trials, event_verdict=cast(Verdict, verdict))


def _retain(v: Validator, raw: object) -> Retain | Bad | None:
    if raw is None:
        return None
    if v.mapping("retain", raw, K.RETAIN_KEYS) is BAD or not isinstance(raw, dict):
        return BAD
    # a level left out is the table's default, filled here as every other block's default is
    # (not left to Retain's own): one place says what a recipe without the key means
    levels: dict[str, Any] = {
        key: (v.choice(K.path("retain", key), raw[key], K.RETAIN_LEVELS) if key in raw
              else K.default_of("retain", key, str)) for key in sorted(K.RETAIN_KEYS)}
    if BAD in levels.values():
        return BAD
    return Retain(**levels)


def _regex(v: Validator, path: str, raw: object) -> str | Bad:
    text = v.string(path, raw, hint="write a regular expression in single quotes")
    if text is BAD:
        return BAD
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        return v.issue(path, f"not a valid regular expression: {exc}",
                       "check brackets and escapes; in YAML, single quotes keep backslashes as is")
    from aorta_tui.classify.linear import recipe_regex_issue  # patterns run on RE2

    return text if (issue := recipe_regex_issue(text)) is None else v.issue(path, *issue)


def _disable_detectors(v: Validator, raw: object, raw_tiers: object, pattern_ids: set[str]
                       ) -> tuple[str, ...] | Bad:
    out: list[str] = []
    ok = True
    catalogue = _detector_catalogue()
    for path, value in (("disable_detectors", raw), ("disable_detector_tiers", raw_tiers)):
        if value is None:
            continue
        items = v.str_list(path, value, what="detector ids")
        if items is BAD:
            ok = False
            continue
        for i, token in enumerate(items):
            norm = _detector_token(token)
            if norm is None or (path == "disable_detector_tiers" and norm not in K.DETECTOR_TIERS):
                v.issue(f"{path}[{i}]", f"{token!r} is not a detector id",
                        "write a whole tier (tier1 .. tier5), a detector id such as 'hang', or "
                        "'<tier>:<id>' such as 'tier4:cuda_error' or 'custom:my_pattern' "
                        "(aorta-tui sweep list-patterns lists the ids)")
                ok = False
                continue
            problem = _unknown_detector(norm, catalogue, pattern_ids)
            if problem is not None:
                v.issue(f"{path}[{i}]", problem[0], problem[1])
                ok = False
            elif norm not in out:
                out.append(norm)
    return tuple(out) if ok else BAD


def check_detector_tokens(tokens: Iterable[str], pattern_ids: set[str]
                          ) -> list[tuple[str, str | None, tuple[str, str] | None]]:
    """``(token, normalised, problem)`` per token, checked as ``disable_detectors`` entries
    (``--disable-detector`` uses it: one rule for the recipe key and the flag)."""
    catalogue = _detector_catalogue()
    out: list[tuple[str, str | None, tuple[str, str] | None]] = []
    for token in tokens:
        norm = _detector_token(token)
        if norm is None:
            out.append((token, None, (f"{token!r} is not a detector id",
                                      "write a whole tier (tier1 .. tier5), a detector id such "
                                      "as 'hang', or '<tier>:<id>' such as 'tier4:cuda_error'")))
            continue
        out.append((token, norm, _unknown_detector(norm, catalogue, pattern_ids)))
    return out


def _detector_token(token: str) -> str | None:
    """``tierN``, ``<tier|custom>:<id>`` (prefix lower-cased) or a bare detector id."""
    cleaned = token.strip()
    if cleaned.lower() in K.DETECTOR_TIERS:
        return cleaned.lower()
    prefix, sep, ident = cleaned.partition(":")
    if not sep:
        return cleaned if re.fullmatch(r"[A-Za-z0-9_.-]+", cleaned) else None
    prefix, ident = prefix.strip().lower(), ident.strip()
    if not ident or prefix not in K.DETECTOR_PREFIXES or any(c.isspace() for c in ident):
        return None
    return f"{prefix}:{ident}"


def _detector_catalogue() -> dict[str, int] | None:
    """Built-in detector id -> tier, from the classifier; None where it cannot be imported."""
    try:
        from aorta_tui.classify import builtin_detector_ids

        return dict(builtin_detector_ids())
    except Exception:  # the classifier is optional here: fall back to checking the shape
        return None


def _unknown_detector(token: str, catalogue: dict[str, int] | None, pattern_ids: set[str]
                      ) -> tuple[str, str] | None:
    if token in K.DETECTOR_TIERS:
        return None
    prefix, _, ident = token.rpartition(":")
    if prefix == "custom":
        if ident in pattern_ids:
            return None
        near = _suggest(ident, pattern_ids)
        return (f"no custom pattern of this recipe has the id {ident!r}",
                phrase(f"custom:{near}" if near else None)
                + "custom:<id> names one of this recipe's custom_patterns")
    upstream = _upstream_ids()
    if token in upstream:  # upstream AORTA's ids: each maps to ours (classify/upstream_ids.py)
        return None
    if catalogue is None:
        return None
    if not prefix and ident in pattern_ids:
        return None
    if ident in catalogue:
        tier = catalogue[ident]
        if prefix and prefix != f"tier{tier}":
            return (f"{ident!r} is a tier-{tier} detector, not {prefix}",
                    f"write 'tier{tier}:{ident}' or just '{ident}'")
        return None
    near = _suggest(ident, set(catalogue) | pattern_ids)
    if prefix:  # also upstream's ids of that tier: 'tier3:vram_growht' -> 'tier3:vram_growth'
        theirs = {u.partition(":")[2]: u for u in upstream if u.startswith(f"{prefix}:")}
        near_theirs = _suggest(ident, set(theirs) | ({near} if near else set()))
        if near_theirs in theirs and near_theirs not in catalogue:
            near = theirs[near_theirs]
    return (f"unknown detector {ident!r}",
            phrase(near)
            + "`aorta-tui sweep list-patterns` lists the built-in ids; upstream AORTA's "
            "tierN:<id> names are accepted too")


def _upstream_ids() -> set[str]:
    try:
        from aorta_tui.classify.upstream_ids import UPSTREAM_ALIASES

        return set(UPSTREAM_ALIASES)
    except Exception:  # the classifier is optional here (as for the catalogue)
        return set()


def _custom_patterns(v: Validator, raw: object) -> tuple[CustomPattern, ...] | Bad:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        return v.issue("custom_patterns", f"expected a list of patterns, got {type_name(raw)}",
                       "write `- id: ...` entries, each with `match: {regex: '...'}`")
    out: list[CustomPattern] = []
    ids: set[str] = set()
    ok = True
    for i, entry in enumerate(raw):
        path = f"custom_patterns[{i}]"
        pattern = _custom_pattern(v, path, entry, ids)
        if pattern is BAD:
            ok = False
        else:
            out.append(pattern)
    return tuple(out) if ok else BAD


def _custom_pattern(v: Validator, path: str, entry: object, ids: set[str]) -> CustomPattern | Bad:
    if v.mapping(path, entry, K.PATTERN_KEYS) is BAD or not isinstance(entry, dict):
        return BAD
    id_k, match_k, on_match_k, required_k = K.specs("pattern", "id", "match", "on_match",
                                                    "required_for_pass")
    ok = True
    pid: str | Bad = BAD
    if v.require(path, entry, id_k.name, "add `id: my_pattern` (reported as custom:<id>)"):
        pid = v.string(id_k.at(path), entry[id_k.name])
        if pid is not BAD and pid in ids:
            pid = v.issue(id_k.at(path), f"id {pid!r} is used by another pattern",
                          "give every custom pattern its own id")
        elif pid is not BAD:
            ids.add(pid)
    regex, condition = (_match(v, match_k.at(path), entry[match_k.name])
                        if v.require(path, entry, match_k.name,
                                     "add `match: {regex: 'your pattern'}`") else (BAD, None))
    on_match = v.choice(on_match_k.at(path), entry.get(
        on_match_k.name, K.default_of("pattern", on_match_k.name, str)), K.ON_MATCH)
    required = entry.get(required_k.name, K.default_of("pattern", required_k.name, bool))
    required = v.boolean(required_k.at(path), required)
    if required is True and on_match not in (BAD, "fail"):
        v.issue(required_k.at(path), f"required_for_pass needs on_match: fail (this "
                f"pattern has on_match: {on_match})", "set on_match: fail or drop "
                "required_for_pass")
        ok = False
    if (not ok or pid is BAD or regex is BAD or condition is BAD or on_match is BAD
            or required is BAD):
        return BAD
    return CustomPattern(id=pid, regex=regex, condition=condition,
                         on_match=cast(OnMatch, on_match), required_for_pass=required)


def _match(v: Validator, path: str, match: object) -> tuple[str | Bad, str | Bad | None]:
    """A pattern's ``match: {regex, condition}``: its regex (BAD when it is none) and its
    condition (None without one)."""
    regex_k, condition_k = K.specs("match", "regex", "condition")
    if v.mapping(path, match, K.MATCH_KEYS,
                 what="a mapping with `regex` (and optionally `condition`)") is BAD \
            or not isinstance(match, dict):
        return BAD, None
    regex: str | Bad = BAD
    condition: str | Bad | None = None
    if v.require(path, match, regex_k.name, "add `regex: '...'`"):
        regex = _regex(v, regex_k.at(path), match[regex_k.name])
    if match.get(condition_k.name) is not None and regex is not BAD:
        condition = _condition(v, condition_k.at(path), match[condition_k.name], regex)
    return regex, condition


def _condition(v: Validator, path: str, raw: object, regex: str) -> str | Bad:
    from aorta_tui.recipe.condition import compile_condition

    if not isinstance(raw, str):
        return v.issue(path, f"expected an expression string, got {type_name(raw)}",
                       "quote it: condition: \"float(capture['loss']) > 10\"")
    names = set(CONDITION_VARIABLES) | set(re.compile(regex).groupindex)
    try:
        compile_condition(raw, names=names)
    except AortaError as exc:
        return v.issue(path, exc.message, exc.hint)
    return raw.strip()


def _trace(v: Validator, raw: object) -> TraceSpec | Bad | None:
    if raw is None:
        return None
    if v.mapping("trace", raw, K.TRACE_KEYS) is BAD or not isinstance(raw, dict):
        return BAD
    probes_k, mode_k = K.specs("trace", "probes", "mode")
    probes = v.str_list(K.path("trace", probes_k.name), raw.get(probes_k.name, []),
                        what="probe names")
    if probes is not BAD:
        for i, p in enumerate(probes):
            if not _PROBE_NAME_RE.fullmatch(p):
                v.issue(child_path(K.path("trace", probes_k.name), i), f"{p!r} is not a probe name",
                        "probe names are letters, digits, '_', '.', ':' and '-' "
                        "(aorta-tui trace list shows them)")
                probes = BAD
    if probes is not BAD and probes:
        probes = _known_probes(v, probes)
    mode = v.choice(K.path("trace", mode_k.name),
                    raw.get(mode_k.name, K.default_of("trace", mode_k.name, str)), K.TRACE_MODES)
    if probes is BAD or mode is BAD:
        return BAD
    return TraceSpec(probes=tuple(probes), mode=cast(TraceMode, mode))


# An example of each Slurm word the executor block takes, for the fix of a malformed one (its
# pattern is the table's: keys.KEY_SPECS)
_SLURM_EXAMPLES = {"partition": "gpu", "account": "my-project", "gres": "gpu:1",
                   "time": "01:30:00", "constraint": "a100"}


def _executor(v: Validator, raw: object) -> ExecutorSpec | Bad:
    """``executor: local|slurm`` or ``{kind: slurm, partition, account, ...}`` (docs/slurm.md)."""
    if raw is None:
        return ExecutorSpec()
    if isinstance(raw, str):
        kind = v.choice("executor", raw, K.EXECUTOR_KINDS)
        return BAD if kind is BAD else ExecutorSpec(kind=kind)
    if v.mapping("executor", raw, K.EXECUTOR_KEYS, what="local, slurm or a mapping") is BAD \
            or not isinstance(raw, dict):
        return BAD
    kind_k = K.spec("executor", "kind")
    kind = v.choice(K.path("executor", kind_k.name),
                    raw.get(kind_k.name, K.default_of("executor", kind_k.name, str)),
                    K.EXECUTOR_KINDS)
    fields = _slurm_words(v, raw, kind)
    extra = _extra_sbatch(v, raw, kind)
    fields |= _slurm_counts(v, raw, kind)
    extra = _distributed_clash(v, raw, extra)
    gres_k, gpus_k = K.specs("executor", "gres", "gpus_per_node")
    if fields.get(gres_k.name) is not None and fields.get(gpus_k.name) is not None:
        fields[gres_k.name] = v.issue(
            K.path("executor", gres_k.name), "gres and gpus_per_node both say how many GPUs "
            "a node gives the trial", "keep one: gpus_per_node: K asks for --gres=gpu:K on "
            "every node")
    if kind is BAD or extra is BAD or BAD in fields.values():
        return BAD
    return ExecutorSpec(kind=kind, extra_sbatch=tuple(extra), **fields)


def _slurm_only(v: Validator, key: str) -> object:
    """The issue of a Slurm option under ``kind: local``: a Slurm job's, never ignored."""
    return v.issue(K.path("executor", key), f"{key} is a Slurm option, and kind is local",
                   "add `kind: slurm`, or remove it")


def _slurm_words(v: Validator, raw: dict[str, Any], kind: object) -> dict[str, Any]:
    """partition, account, gres, time, constraint: each in the form sbatch takes (the table's
    pattern); a value under ``kind: local`` is refused and left out."""
    fields: dict[str, Any] = {}
    for key, example in _SLURM_EXAMPLES.items():
        spec = K.spec("executor", key)
        value = raw.get(key)
        if value is None:
            continue
        if kind == "local":
            _slurm_only(v, key)
            continue
        value = v.string(K.path("executor", key), value)
        if value is not BAD and not re.fullmatch(_pattern_of(spec), value):
            value = v.issue(K.path("executor", key), f"{clip_for_message(value)} is not a Slurm "
                            f"{key}", f"write it as sbatch --{key} takes it, e.g. {example}")
        fields[key] = value
    return fields


def _pattern_of(spec: KeySpec) -> str:
    """The regex the table gives a string key's value (its shape's ``pattern``)."""
    shape = spec.shape
    pattern = shape.get("pattern") if isinstance(shape, Mapping) else None
    if not isinstance(pattern, str):
        raise TypeError(f"{spec.block}.{spec.name} has no pattern in the key table")
    return pattern


def _extra_sbatch(v: Validator, raw: dict[str, Any], kind: object) -> Sequence[str] | Bad:
    """``extra_sbatch``: long options only, none the executor sets itself, for kind: slurm."""
    path = K.path("executor", "extra_sbatch")
    extra = raw.get("extra_sbatch")
    extra = () if extra is None else v.str_list(path, extra, what="sbatch options")
    if extra not in (BAD, ()) and kind == "local":
        extra = v.issue(path, "extra_sbatch is for kind: slurm", "add `kind: slurm`, or remove it")
    for i, opt in enumerate(extra if extra is not BAD else ()):
        name = opt.split("=", 1)[0]
        if not opt.startswith("--") or any(c in opt for c in "\n\r\x00"):
            extra = v.issue(child_path(path, i), f"{clip_for_message(opt)} is not a long sbatch "
                            "option", "write each as one `--name=value` word, e.g. --qos=high")
        elif name in K.SLURM_OWN_OPTIONS:
            extra = v.issue(child_path(path, i), f"{name} is set by aorta-tui itself",
                            "remove it (the executor sets it per submission, docs/slurm.md)")
    return extra


def _slurm_counts(v: Validator, raw: dict[str, Any], kind: object) -> dict[str, Any]:
    """nodes and gpus_per_node: a distributed trial across nodes is a Slurm job's."""
    fields: dict[str, Any] = {}
    for key, most in (("nodes", K.SLURM_MAX_NODES), ("gpus_per_node", K.SLURM_MAX_GPUS_PER_NODE)):
        if raw.get(key) is None:
            continue
        if kind == "local":
            fields[key] = _slurm_only(v, key)
            continue
        fields[key] = v.integer(K.path("executor", key), raw[key], minimum=1, maximum=most)
    return fields


def _distributed_clash(v: Validator, raw: dict[str, Any], extra: Sequence[str] | Bad
                       ) -> Sequence[str] | Bad:
    """With nodes or gpus_per_node set, extra_sbatch may not say the same (aorta-tui does)."""
    nodes_k, gpus_k = K.specs("executor", "nodes", "gpus_per_node")
    distributed = raw.get(nodes_k.name) is not None or raw.get(gpus_k.name) is not None
    for i, opt in enumerate(extra if extra is not BAD and distributed else ()):
        if opt.split("=", 1)[0] in K.SLURM_DISTRIBUTED_OPTIONS:
            extra = v.issue(child_path(K.path("executor", "extra_sbatch"), i),
                            f"{opt.split('=', 1)[0]} is set by aorta-tui from executor.nodes and "
                            "gpus_per_node", "remove it, or set nodes / gpus_per_node instead")
    return extra


def _known_probes(v: Validator, probes: list[str]) -> list[str] | Bad:
    """Each name must be a probe set of the catalogue, as ``trace --probes`` requires."""
    from aorta_tui.recipe.catalogues import probe_sets  # only recipes that trace pay for it

    catalogue = probe_sets()  # the trace package's, registered (recipe/catalogues.py)

    ok = True
    for i, p in enumerate(probes):
        if p not in catalogue:
            v.issue(child_path(K.path("trace", "probes"), i), f"unknown probe set {p!r}",
                    did_you_mean(p, catalogue)
                    + f"choose from {', '.join(catalogue)} (aorta-tui trace info shows which "
                    "work here)")
            ok = False
    if len(set(probes)) != len(probes):
        v.issue(K.path("trace", "probes"), "a probe set is listed twice",
                "list each probe set once")
        ok = False
    return probes if ok else BAD


def _policy_axis(v: Validator, raw: object) -> tuple[str, ...] | Bad:
    if raw is None:
        return ()
    items = v.str_list("policy_axis", raw, what="policy names")
    if items is BAD:
        return BAD
    seen: set[str] = set()
    for i, name in enumerate(items):
        if not _CELL_NAME_RE.fullmatch(name):
            v.issue(f"policy_axis[{i}]", f"{name!r} is not a policy name",
                    "policy names are letters, digits, '.', '_' and '-' "
                    "(aorta-tui policy list shows them)")
            return BAD
        if name in seen:
            return v.issue(f"policy_axis[{i}]", f"policy {name!r} is listed twice",
                           "list each policy once")
        seen.add(name)
    return tuple(items)


def _written_cell_names(data: dict[str, Any], mode: str) -> set[str]:
    """The cell names as written, those of cells with errors of their own included."""
    raw = data.get("cells") if mode == "triage" else None
    if not isinstance(raw, list):
        return set()
    return {c["name"] for c in raw if isinstance(c, dict) and isinstance(c.get("name"), str)}


def _confound(v: Validator, raw: object, cells: tuple[CellSpec, ...], mode: str,
              written: set[str]) -> Confound | Bad:
    threshold_k, baseline_k = K.specs("confound", "threshold", "baseline_cell")
    threshold: float | Bad = K.default_of("confound", threshold_k.name, float)
    explicit: str | Bad | None = None
    if raw is not None:
        if v.mapping("confound", raw, K.CONFOUND_KEYS) is BAD or not isinstance(raw, dict):
            return BAD
        if raw.get(threshold_k.name) is not None:
            threshold = v.number(K.path("confound", threshold_k.name), raw[threshold_k.name],
                                 above=0, at_most=K.MAX_CONFOUND_THRESHOLD)
        if raw.get(baseline_k.name) is not None:
            explicit = v.string(K.path("confound", baseline_k.name), raw[baseline_k.name])
    if threshold is BAD or explicit is BAD:
        return BAD
    if not cells:
        return Confound(threshold=threshold)
    names = [c.name for c in cells]
    if explicit is not None:
        if explicit not in names and explicit in written:
            return BAD  # that cell has an error of its own, reported there: no knock-on
        if explicit not in names:
            return v.issue(K.path("confound", baseline_k.name), f"no cell is named {explicit!r}",
                           did_you_mean(explicit, names)
                           + f"cells: {', '.join(names)}")
        return Confound(threshold=threshold, baseline_cell=explicit, baseline_rule="explicit")
    name, rule = resolve_baseline(cells, mode)
    return Confound(threshold=threshold, baseline_cell=name, baseline_rule=rule)


def resolve_baseline(cells: tuple[CellSpec, ...], mode: str = "triage") -> tuple[str, str]:
    """Upstream's rule: first ``baseline-*`` cell, else first cell that changes nothing
    (mitigations all ``none``; in probe mode the ``none-none`` cell), else the first cell."""
    if mode == "triage":
        for c in cells:
            if c.name.startswith("baseline-"):
                return c.name, "baseline-prefix"
    for c in cells:
        if all(m == "none" for m in c.mitigations):
            return c.name, "none-mitigations"
    return cells[0].name, "first-cell"


# -- triage ----------------------------------------------------------------------------------
def _triage(v: Validator, data: dict[str, Any]) -> dict[str, Any]:
    workload: str | Bad = BAD
    if v.require("", data, "workload", "add `workload: gpu_smoke` (aorta-tui sweep "
                 "list-workloads lists them)"):
        workload = v.string("workload", data["workload"])
        if workload is not BAD:
            workload = _known_workload(v, workload)
    steps: int | Bad = BAD
    if v.require("", data, "steps", "add `steps: 20` (steps per trial)"):
        steps = v.integer("steps", data["steps"], minimum=1, maximum=K.MAX_STEPS)
    workload_config = _workload_config(v, "workload_config", data.get("workload_config"))
    save_logs = _only_value(v, data, "save_logs",
                            "save_logs: false cannot be honoured: aorta-tui always saves each "
                            "trial's stdout and stderr (its classifier reads them)",
                            "remove the key; to drop the logs of passing trials after they "
                            "are classified, write `retain: {on_pass: none}`")
    extra_env = v.env_map("extra_env", data.get("extra_env"))
    isolation = data.get("trial_isolation")
    if isolation is None or isolation == "auto":  # upstream's `auto`: a fresh process here
        isolation = K.default_of(TOP, "trial_isolation", str)
    else:
        isolation = v.choice("trial_isolation", isolation, K.TRIAL_ISOLATION)

    cells: tuple[CellSpec, ...] = ()
    if v.require("", data, "cells", "add a `cells:` list, e.g. "
                 "`cells: [{name: baseline-local, mitigations: [none]}]`"):
        cells = _cells(v, data["cells"])

    return dict(workload=workload, steps=steps, workload_config=workload_config,
                save_logs=save_logs, extra_env=extra_env, trial_isolation=isolation, cells=cells)


def _known_workload(v: Validator, name: str) -> str | Bad:
    """An unknown name is an error with the closest registered one (a run would stop on it);
    a registered workload that fails to import here is only a note (sweep/workload_check.py)."""
    known = None if v.registry is None else v.registry.workload_names
    if not known or name in known or not_carried(name):
        # no registry or none registered (not installed), or upstream's own workload that
        # plans here and stops a real run (recipe/upstream_workloads.py)
        return name
    return v.issue("workload", f"unknown workload {name!r}", did_you_mean(name, known)
                   + "`aorta-tui sweep list-workloads` lists them")


def _workload_config(v: Validator, path: str, raw: object) -> dict[str, Any] | Bad:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return v.issue(path, f"expected a mapping of workload settings, got {type_name(raw)}",
                       "write `key: value` lines (aorta-tui sweep list-workloads shows each "
                       "workload's settings)")
    ok = v.json_data(path, raw)
    for k in raw:
        if k == "steps":
            v.issue(child_path(path, k), "'steps' is not a workload setting",
                    "set `steps:` on the recipe or the cell instead", key=True)
            ok = False
        elif isinstance(k, str) and k.startswith("_aorta"):
            v.issue(child_path(path, k), f"{k!r} is reserved for values the engine supplies",
                    "rename the key", key=True)
            ok = False
    return dict(raw) if ok else BAD


def _cells(v: Validator, raw: object) -> tuple[CellSpec, ...]:
    if not isinstance(raw, list):
        v.issue("cells", f"expected a list of cells, got {type_name(raw)}",
                "write each cell as `- name: ...` under `cells:`")
        return ()
    if not raw:
        v.issue("cells", "the recipe has no cells", "add at least one cell, e.g. "
                "`- {name: baseline-local, mitigations: [none]}`")
        return ()
    cells: list[CellSpec] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        cell = _cell(v, f"cells[{i}]", entry)
        if cell is BAD:
            continue
        if cell.name in seen:
            v.issue(f"cells[{i}].name", f"cell name {cell.name!r} is already used by "
                    f"cells[{seen[cell.name]}]", "cell names must be unique (they name the "
                    "cell's directory and its matrix row)")
            continue
        seen[cell.name] = i
        cells.append(cell)
    return tuple(cells)


def _cell(v: Validator, path: str, raw: object) -> CellSpec | Bad:
    if v.mapping(path, raw, K.CELL_KEYS, what="a cell mapping") is BAD or not isinstance(raw, dict):
        return BAD
    name_k, mitigations_k, env_k, extra_env_k, trials_k, steps_k, config_k, collect_k = K.specs(
        "cell", "name", "mitigations", "environment", "extra_env", "trials", "steps",
        "workload_config", "collect")
    name: str | Bad = BAD
    if v.require(path, raw, name_k.name, "add `name: my-cell` (letters, digits, '.', '_', '-')"):
        name = _safe_component(v, name_k.at(path), raw[name_k.name], what="cell name")
    mitigations: list[str] | Bad = BAD
    if v.require(path, raw, mitigations_k.name, "add `mitigations: [none]` for a baseline cell"):
        mitigations = v.str_list(mitigations_k.at(path), raw[mitigations_k.name],
                                 what="mitigation names")
        if mitigations is not BAD and not mitigations:
            mitigations = v.issue(mitigations_k.at(path), "the list is empty",
                                  "write `[none]` for the baseline (no mitigation)")
    env_raw = raw.get(env_k.name)
    environment = (K.default_of("cell", env_k.name, str) if env_raw is None
                   else _environment(v, env_k.at(path), env_raw))
    extra_env = v.env_map(extra_env_k.at(path), raw.get(extra_env_k.name))
    trials = raw.get(trials_k.name)
    if trials is not None:
        trials = v.integer(trials_k.at(path), trials, minimum=1, maximum=K.MAX_TRIALS)
    steps = raw.get(steps_k.name)
    if steps is not None:
        steps = v.integer(steps_k.at(path), steps, minimum=1, maximum=K.MAX_STEPS)
    workload_config = raw.get(config_k.name)
    if workload_config is not None:
        workload_config = _workload_config(v, config_k.at(path), workload_config)
    collect = None
    if collect_k.name in raw:  # present replaces the recipe's; [] or null: none in this cell
        written = raw[collect_k.name]
        collect = () if written is None else _collect(v, collect_k.at(path), written)[0]
    _registry_checks_cell(v, path, name, mitigations, environment)
    if (name is BAD or mitigations is BAD or environment is BAD or extra_env is BAD
            or trials is BAD or steps is BAD or workload_config is BAD or collect is BAD):
        return BAD
    return CellSpec(name=name, mitigations=tuple(mitigations), environment=environment,
                    extra_env=extra_env, trials=trials, steps=steps,
                    workload_config=workload_config, collect=collect)


def _collect(v: Validator, path: str, raw: object
             ) -> tuple[tuple[str, ...] | Bad, dict[str, dict[str, str]]]:
    """Upstream's `collect:`: a list of names, or name -> {OPTION: "string"} (null: none)."""
    from aorta_tui.recipe.collector_names import KNOWN_COLLECTORS

    if raw is None:
        return (), {}
    options: dict[str, dict[str, str]] = {}
    if isinstance(raw, dict):
        names = list(raw)
        for name, opts in raw.items():
            if opts is None:
                continue
            if not isinstance(opts, dict) or not all(isinstance(k, str) and isinstance(x, str)
                                                     for k, x in opts.items()):
                v.issue(f"{path}.{name}", "collector options must map option names to strings",
                        'quote the values: {NANLOG_SAMPLE_EVERY: "1"}')
                return BAD, {}
            options[str(name)] = dict(opts)
    elif isinstance(raw, list):
        names = raw
    else:
        v.issue(path, f"expected a list of collector names or a mapping name -> options, got "
                f"{type_name(raw)}", "write `collect: [layer_numerics]`")
        return BAD, {}
    ok = True
    for i, name in enumerate(names):
        where = f"{path}[{i}]" if isinstance(raw, list) else f"{path}.{name}"
        if not isinstance(name, str) or name not in KNOWN_COLLECTORS:
            v.issue(where, f"unknown collector {name!r}", did_you_mean(str(name), KNOWN_COLLECTORS)
                    + "known: " + ", ".join(sorted(KNOWN_COLLECTORS)))
            ok = False
    from aorta_tui.recipe.catalogues import collector_option_problems  # upstream's schemas

    for name, opts in options.items():
        for key, problem, fix in collector_option_problems(name, opts):
            v.issue(f"{path}.{name}.{key}", problem, fix)
            ok = False
    return (tuple(dict.fromkeys(names)), options) if ok else (BAD, {})


def _environment(v: Validator, path: str, raw: object) -> str | dict[str, Any] | Bad:
    if isinstance(raw, str):
        return v.string(path, raw)
    if not isinstance(raw, dict):
        return v.issue(path, f"expected an environment name or {{docker: image, env: {{...}}}}, "
                       f"got {type_name(raw)}", "write `environment: local` or "
                       "`environment: {docker: rocm/pytorch:latest}`")
    if v.mapping(path, raw, K.INLINE_ENV_KEYS, what="an inline environment") is BAD:
        return BAD
    docker_k, env_k = K.specs("inline_env", "docker", "env")
    if not v.require(path, raw, docker_k.name, "an inline environment names its image: "
                     "`{docker: rocm/pytorch:latest}`; for variables alone use the cell's "
                     "extra_env"):
        return BAD
    image = v.string(docker_k.at(path), raw[docker_k.name])
    if image is not BAD and (problem := docker_image_problem(image)) is not None:
        image = v.issue(docker_k.at(path), problem[0], problem[1])
    env = v.env_map(env_k.at(path), raw.get(env_k.name))
    if image is BAD or env is BAD:
        return BAD
    return {"docker": image, "env": env}


def _registry_checks_cell(v: Validator, path: str, name: str | Bad, mitigations: list[str] | Bad,
                          environment: object) -> None:
    """Names must exist in the registry, and the cell's mitigations must agree."""
    reg = v.registry
    if reg is None:
        return
    known = mitigations is not BAD
    for j, m in enumerate(mitigations if mitigations is not BAD else ()):
        if m not in reg.mitigations:
            known = False
            _unknown(v, child_path(K.spec("cell", "mitigations").at(path), j), "mitigation", m,
                     reg.mitigations,
                     "aorta-tui sweep list-mitigations")
    if isinstance(environment, str) and environment not in reg.environments:
        _unknown(v, K.spec("cell", "environment").at(path), "environment", environment,
                 reg.environments,
                 "aorta-tui sweep list-environments")
    if known and mitigations is not BAD:  # known: the list was read and every name is
        label = name if name is not BAD else path
        _check_conflicts(v, K.spec("cell", "mitigations").at(path), label, mitigations)


def _unknown(v: Validator, path: str, kind: str, name: str, known: Iterable[str],
             command: str) -> None:
    v.issue(path, f"unknown {kind} {name!r}",
            did_you_mean(name, known) + f"`{command}` lists them"
            + ("; add your own with --mitigations-file" if kind == "mitigation" else ""))


def _check_conflicts(v: Validator, path: str, cell_name: str, names: Iterable[str]) -> None:
    from aorta_tui.recipe.checks import mitigation_env

    reg = v.registry
    assert reg is not None
    try:
        mitigation_env([reg.mitigations[n] for n in names], where=f"cell {cell_name!r}")
    except AortaError as exc:
        v.issue(path, exc.message, "keep one of them, or pin the value with the cell's extra_env")


# -- probe -----------------------------------------------------------------------------------
def _probe(v: Validator, data: dict[str, Any]) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for axis in ("mitigation_axis", "diagnostic_axis"):
        if v.require("", data, axis, f"add `{axis}: [none, ...]` (mitigation names; `none` "
                     "is the no-op)"):
            axes[axis] = v.str_list(axis, data[axis], nonempty=True, what="mitigation names")
        else:
            axes[axis] = BAD
    collect_paths = data.get("collect_paths")
    collect_paths = () if collect_paths is None else v.str_list("collect_paths", collect_paths,
                                                                what="paths or globs")
    passthrough = data.get("env_passthrough_mode")
    passthrough = K.default_of(TOP, "env_passthrough_mode", str) if passthrough is None else v.choice(
        "env_passthrough_mode", passthrough, K.ENV_PASSTHROUGH)
    redaction = _redaction(v, data) if "redaction" in data else None
    command = data.get("command")
    if command is not None:
        command = v.str_list("command", command, nonempty=True, what="argv words")
    cells: tuple[CellSpec, ...] = ()
    m_axis, d_axis = axes["mitigation_axis"], axes["diagnostic_axis"]
    if BAD not in (m_axis, d_axis):
        cells = _probe_cells(v, m_axis, d_axis)
    return dict(mitigation_axis=tuple(m_axis) if m_axis is not BAD else (),
                diagnostic_axis=tuple(d_axis) if d_axis is not BAD else (),
                collect_paths=tuple(collect_paths) if collect_paths is not BAD else BAD,
                env_passthrough_mode=passthrough, redaction=redaction,
                command=tuple(command) if command not in (None, BAD) else command,
                cells=cells)


def _redaction(v: Validator, data: dict[str, Any]) -> Redaction | Bad:
    raw = data["redaction"]
    if v.mapping("redaction", raw, K.REDACTION_KEYS) is BAD or not isinstance(raw, dict):
        return BAD
    keys_k, paths_k, ips_k = K.specs("redaction", "scrub_env_keys", "scrub_paths",
                                     "scrub_ip_addresses")
    keys = v.str_list(K.path("redaction", keys_k.name), raw.get(keys_k.name) or [],
                      what="variable-name globs")
    paths, ips = (v.boolean(K.path("redaction", k.name),
                            raw.get(k.name, K.default_of("redaction", k.name, bool)))
                  for k in (paths_k, ips_k))
    if keys is BAD or paths is BAD or ips is BAD:
        return BAD
    return Redaction(scrub_env_keys=tuple(keys), scrub_paths=paths, scrub_ip_addresses=ips)


def probe_segment(name: str) -> str:
    """An axis value as a cell-name segment (upstream's slug: unsafe characters become _)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    if not cleaned or cleaned[0] in ".-":
        cleaned = "_" + cleaned
    return cleaned


def _probe_cells(v: Validator, m_axis: list[str], d_axis: list[str]) -> tuple[CellSpec, ...]:
    reg = v.registry
    unknown = False
    if reg is not None:
        for axis, items in (("mitigation_axis", m_axis), ("diagnostic_axis", d_axis)):
            for i, name in enumerate(items):
                if name not in reg.mitigations:
                    unknown = True
                    _unknown(v, f"{axis}[{i}]", "mitigation", name, reg.mitigations,
                             "aorta-tui sweep list-mitigations")
    # Each axis value once, remembering where it is written; a repeat is reported and left out
    # of the cross product, so n repeats cost O(n), not O(n^2) cells to build and compare.
    unique: dict[str, dict[str, int]] = {}
    for axis, items in (("mitigation_axis", m_axis), ("diagnostic_axis", d_axis)):
        first: dict[str, int] = {}
        for i, name in enumerate(items):
            if name in first:
                v.issue(f"{axis}[{i}]", f"{name!r} is listed twice in {axis} (first at "
                        f"{axis}[{first[name]}])", "list each name once")
            first.setdefault(name, i)
        unique[axis] = first
    m_first, d_first = unique["mitigation_axis"], unique["diagnostic_axis"]
    if len(m_first) * len(d_first) > K.MAX_CELLS:
        v.issue("diagnostic_axis", f"mitigation_axis x diagnostic_axis makes "
                f"{len(m_first)} x {len(d_first)} = {len(m_first) * len(d_first)} cells; at "
                f"most {K.MAX_CELLS}", "split the sweep into several recipes")
        return ()
    cells: list[CellSpec] = []
    origin: dict[str, tuple[str, str]] = {}
    for m, i in m_first.items():
        for d, j in d_first.items():
            name = f"{probe_segment(m)}-{probe_segment(d)}"
            if name in origin:
                if origin[name] != (m, d):
                    v.issue(f"diagnostic_axis[{j}]", f"({m!r}, {d!r}) and {origin[name]!r} "
                            f"both make the cell name {name!r}", "rename one of the axis values")
                continue
            if len(name) > 100:
                v.issue(f"mitigation_axis[{i}]", f"cell name {name[:40]}... is longer than 100 "
                        "characters", "use shorter mitigation names")
                continue
            origin[name] = (m, d)
            # a generated cell has no text of its own: point at the axis entries that made it
            marks = v.marks.values
            if f"diagnostic_axis[{j}]" in marks:
                marks.setdefault(f"cells[{len(cells)}]", marks[f"mitigation_axis[{i}]"])
                marks.setdefault(f"cells[{len(cells)}].mitigations",
                                 marks[f"diagnostic_axis[{j}]"])
            mitigations = tuple(dict.fromkeys(x for x in (m, d) if x != "none"))
            if reg is not None and not unknown and len(mitigations) > 1:
                _check_conflicts(v, f"diagnostic_axis[{j}]", name, mitigations)
            cells.append(CellSpec(name=name, mitigations=mitigations, environment="local"))
    return tuple(cells)
