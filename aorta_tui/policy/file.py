"""User-defined policies from a YAML or JSON file, with errors that name file:line and key.

Format (``schema_version`` optional, 1 is the only version)::

    schema_version: 1
    policies:
      four_connections:
        description: four hardware work queues
        vendor: cuda                      # any | cuda | rocm (which runtime reads the knobs)
        kind: scheduling                  # scheduling | memory | launch | custom
        env: {CUDA_DEVICE_MAX_CONNECTIONS: "4"}
        harness_args: ["--stream-priority", "lc"]   # extra `aorta-tui queue run` options
        gpu_control: {clock_level: 5, power_limit_w: 300}   # needs --allow-gpu-control

Every problem (syntax, unknown key, wrong type, duplicate key, a name that shadows a
built-in) is one :class:`UsageError` whose location is ``FILE:LINE`` and whose message starts
with the key path; nothing else escapes :func:`load_policy_file`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, clip_for_message, read_input_bytes
from aorta_tui.policy.presets import (
    BUILTIN_BY_NAME,
    CLOCK_LEVEL_RANGE,
    KINDS,
    POLICY_NAME_RE,
    POWER_LIMIT_W_RANGE,
    VENDORS,
    GpuControlSettings,
    Policy,
)
from aorta_tui.recipe.checks import BAD, Bad, Validator
from aorta_tui.recipe.loader import Marks, child_path

if TYPE_CHECKING:
    import yaml

SCHEMA_VERSION = 1
TOP_KEYS = ("schema_version", "policies")
POLICY_KEYS = ("description", "kind", "vendor", "env", "harness_args", "gpu_control")
GPU_KEYS = ("clock_level", "power_limit_w")
MAX_DEPTH = 32
MAX_NODES = 100_000  # aliases can expand a small file into a huge tree ("billion laughs")
PathKey = tuple[str | int, ...]  # an int: the index of a list item


class _Located:
    """Plain values, the line (1-based) where each key path starts and each scalar as written."""

    def __init__(self, value: object, lines: dict[PathKey, int],
                 raw: dict[PathKey, str] | None = None) -> None:
        self.value = value
        self.lines = lines
        self.raw = raw or {}


def load_policy_file(path: str | Path) -> list[Policy]:
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise UsageError(f"policy file {p} does not exist",
                         hint="check the path given to --policy-file")
    # a regular file only, at most INPUT_LIMITS["policy file"]: a FIFO or /dev/zero is refused
    raw = read_input_bytes(p, what="policy file", limit=INPUT_LIMITS["policy file"],
                           hint="pass a YAML or JSON policy file to --policy-file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UsageError("the file is not UTF-8 text", location=f"{p}:{line}",
                         hint="save the policy file as UTF-8") from None
    return parse_policy_text(text, str(p))


def parse_policy_text(text: str, filename: str = "<policies>") -> list[Policy]:
    is_json = filename.lower().endswith(".json")  # anything else is YAML (a superset of JSON)
    located = _parse_json(text, filename) if is_json else _parse_yaml(text, filename)
    return _PolicyChecks(located, filename).policies()


# -- parsing -------------------------------------------------------------------------------


def _parse_json(text: str, filename: str) -> _Located:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise _Dup(key)
            out[key] = value
        return out

    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except _Dup as dup:
        raise UsageError(f"key {clip_for_message(dup.key)} appears twice in one object",
                         location=f"{filename}:{_json_dup_line(text, dup.key)}",
                         hint="keep one definition of each key") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"not valid JSON: {exc.msg} (column {exc.colno})",
                         location=f"{filename}:{exc.lineno}",
                         hint="fix the JSON syntax (a missing comma or quote?)") from None
    except RecursionError:
        raise UsageError("the JSON is nested too deeply", location=filename) from None
    except ValueError:  # an integer of more than 4300 digits
        raise UsageError("the JSON holds an integer too long to read", location=filename,
                         hint="write numbers of at most a few digits") from None
    # JSON is (nearly) YAML; tabs are only whitespace outside JSON strings, so replacing them
    # keeps line numbers and meaning. Where YAML still disagrees, errors lose only the line.
    lines = _lines_via_yaml(text.replace("\t", " "))
    return _Located(value, lines)


def _json_dup_line(text: str, key: str) -> int:
    needle = json.dumps(key)
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[1] if len(hits) > 1 else (hits[0] if hits else 1)


class _Dup(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _lines_via_yaml(text: str) -> dict[PathKey, int]:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:
        return {}
    lines: dict[PathKey, int] = {}
    if node is None:  # an empty document: no line to find
        return lines
    try:
        _walk(node, (), lines, 0, construct=False, budget=[MAX_NODES])
    except Exception:
        return lines
    return lines


def _parse_yaml(text: str, filename: str) -> _Located:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or exc.context or "syntax error"
        raise UsageError(f"not valid YAML: {problem}", location=f"{filename}:{line}",
                         hint="fix the YAML syntax (indentation, a missing colon or quote?)"
                         ) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"not valid YAML: {exc}", location=filename) from None
    except RecursionError:
        raise UsageError("the YAML is nested too deeply", location=filename) from None
    if node is None:
        raise UsageError("the policy file is empty", location=f"{filename}:1",
                         hint="add a `policies:` mapping (see docs/policy.md)")
    lines: dict[PathKey, int] = {}
    raw: dict[PathKey, str] = {}
    value = _walk(node, (), lines, 0, construct=True, filename=filename, budget=[MAX_NODES],
                  raw=raw)
    return _Located(value, lines, raw)


def _walk(node: yaml.Node, path: PathKey, lines: dict[PathKey, int], depth: int, *,
          construct: bool, budget: list[int], filename: str = "",
          raw: dict[PathKey, str] | None = None) -> object:
    import yaml

    line = node.start_mark.line + 1
    lines.setdefault(path, line)
    where = f"{filename}:{line}"
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise UsageError(f"{_dotted(path)}: nested too deeply or too large (aliases?)",
                         location=where, hint="write a plain, small policy file")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise UsageError(f"{_dotted(path)}: a key must be a plain name",
                                 location=f"{filename}:{key_node.start_mark.line + 1}")
            key = str(key_node.value)
            if key == "<<":
                raise UsageError(f"{_dotted(path)}: merge keys (<<) are not supported",
                                 location=f"{filename}:{key_node.start_mark.line + 1}",
                                 hint="write the keys out")
            if key in out:
                raise UsageError(f"{_dotted((*path, key))}: key appears twice",
                                 location=f"{filename}:{key_node.start_mark.line + 1}",
                                 hint="keep one definition of each key")
            sub = (*path, key)
            lines[sub] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, sub, lines, depth + 1, construct=construct,
                             budget=budget, filename=filename, raw=raw)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _walk(item, (*path, i), lines, depth + 1, construct=construct, budget=budget,
                  filename=filename, raw=raw)
            for i, item in enumerate(node.value)
        ]
    if not construct:
        return node.value
    if raw is not None:
        raw[path] = node.value  # for the validator's quoting hints (YAML reads 4 as an int)
    try:
        return yaml.constructor.SafeConstructor().construct_object(node)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        raise UsageError(f"{_dotted(path)}: cannot read the value "
                         f"{clip_for_message(node.value)} ({clip_for_message(str(exc))})",
                         location=where, hint="quote the value to make it a string") from None


def _dotted(path: PathKey) -> str:
    # a key is echoed at most 60 characters long: a 4 MB key makes a 4 MB message otherwise
    parts = (str(k) if len(str(k)) <= 60 else f"{str(k)[:40]}... ({len(str(k))} characters)"
             for k in path)
    return ".".join(parts) if path else "(top level)"


# -- validation: the recipe validator's checks, on the policy file's positions ---------------


def _marks(located: _Located) -> Marks:
    """The positions the parser recorded, as the recipe validator looks them up (``a.b``,
    ``a[0]``): a key's line for both the key and its value, column unknown (1)."""
    marks = Marks()
    for path, line in located.lines.items():
        dotted = ""
        for part in path:
            dotted = child_path(dotted, part)
        marks.values.setdefault(dotted, (line, 1))
        marks.keys.setdefault(dotted, (line, 1))
    for path, written in located.raw.items():
        dotted = ""
        for part in path:
            dotted = child_path(dotted, part)
        marks.raw[dotted] = written
    return marks


def _first_problem(v: Validator, filename: str) -> UsageError:
    """The first problem (by line) as the policy file's one located error: FILE:LINE."""
    issue = min(v.issues, key=lambda i: (i.line, i.column))
    more = len(v.issues) - 1 + v.more
    message = f"{issue.path or '(top level)'}: {issue.message}"
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    location = f"{filename}:{issue.line}" if issue.line else filename
    return UsageError(message, location=location, hint=issue.hint)


class _PolicyChecks:
    """The policy file's own rules (names, built-ins, sweep-owned options) on :class:`Validator`'s
    type, key, choice, range and environment checks, which a recipe shares."""

    def __init__(self, located: _Located, filename: str) -> None:
        self.doc = located.value
        self.lines = located.lines
        self.filename = filename
        self.v = Validator(_marks(located), filename, None)

    def policies(self) -> list[Policy]:
        v, doc = self.v, self.doc
        if v.mapping("", doc, frozenset(TOP_KEYS),
                     what="a mapping with a `policies:` key (see docs/policy.md)") is BAD \
                or not isinstance(doc, dict):
            raise _first_problem(v, self.filename)
        version = doc.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION or isinstance(version, bool):
            v.issue("schema_version", f"must be {SCHEMA_VERSION}, got {clip_for_message(version)}",
                    f"write `schema_version: {SCHEMA_VERSION}` or remove the key")
        out: list[Policy] = []
        if v.require("", doc, "policies", "add `policies:` with one entry per policy"):
            table = doc["policies"]
            if not isinstance(table, Mapping) or not table:
                v.issue("policies", "expected a non-empty mapping of name -> definition, got "
                        f"{_type_name(table)}", "e.g. policies: {my_policy: {env: {VAR: '1'}}}")
            else:
                out = [p for name, body in table.items()
                       if (p := self._policy(str(name), body)) is not None]
        if v.issues:
            raise _first_problem(v, self.filename)
        return out

    def _policy(self, name: str, body: object) -> Policy | None:
        v = self.v
        path = child_path("policies", name)
        if not POLICY_NAME_RE.fullmatch(name):  # match() let "x\n" through ($)
            v.issue(path, "a policy name is a letter then letters, digits, '_', '.' or '-' (at "
                    "most 64 characters)", "rename the policy", key=True)
            return None
        if name in BUILTIN_BY_NAME:
            v.issue(path, f"{name!r} is a built-in policy",
                    "pick another name; built-ins cannot be redefined", key=True)
            return None
        body = {} if body is None else body
        if v.mapping(path, body, frozenset(POLICY_KEYS), what="a policy mapping") is BAD \
                or not isinstance(body, dict):
            return None
        description = v.string(child_path(path, "description"), body.get("description", ""),
                               nonempty=False)
        kind = v.choice(child_path(path, "kind"), body.get("kind", "custom"), KINDS)
        vendor = v.choice(child_path(path, "vendor"), body.get("vendor", "any"), VENDORS)
        env = v.env_map(child_path(path, "env"), _bare_numbers_as_text(body.get("env")))
        args = self._args(child_path(path, "harness_args"), body.get("harness_args"))
        gpu = self._gpu(child_path(path, "gpu_control"), body.get("gpu_control"))
        if (description is BAD or kind is BAD or vendor is BAD or env is BAD
                or args is BAD or gpu is BAD):
            return None
        line = self.lines.get(("policies", name))
        return Policy(name=name, description=description, kind=kind, vendor=vendor, env=env,
                      harness_args=args, gpu_control=gpu,
                      source=f"{self.filename}:{line}" if line else self.filename)

    def _args(self, path: str, value: object) -> tuple[str, ...] | Bad:
        if value is None:
            return ()
        out = self.v.str_list(path, value, what="`aorta-tui queue run` options")
        if out is BAD:
            return BAD
        for forbidden in ("-o", "--output", "--streams", "--device", "--iterations"):
            if forbidden in out or any(a.startswith(forbidden + "=") for a in out):
                return self.v.issue(path, f"{forbidden} is set by the sweep itself",
                                    "give it to `aorta-tui policy sweep` instead")
        return tuple(out)

    def _gpu(self, path: str, value: object) -> GpuControlSettings | Bad:
        v = self.v
        if value is None:
            return GpuControlSettings()
        if v.mapping(path, value, frozenset(GPU_KEYS),
                     what="a mapping (e.g. gpu_control: {clock_level: 5, power_limit_w: 300})"
                     ) is BAD or not isinstance(value, dict):
            return BAD
        level, watts = value.get("clock_level"), value.get("power_limit_w")
        if level is not None:
            level = v.integer(child_path(path, "clock_level"), level, minimum=CLOCK_LEVEL_RANGE[0],
                              maximum=CLOCK_LEVEL_RANGE[1])
        if watts is not None:
            watts = v.integer(child_path(path, "power_limit_w"), watts, minimum=POWER_LIMIT_W_RANGE[0],
                              maximum=POWER_LIMIT_W_RANGE[1], unit=" watts")
        if level is BAD or watts is BAD:
            return BAD
        return GpuControlSettings(clock_level=level, power_limit_w=watts)


def _bare_numbers_as_text(env: object) -> object:
    """A policy file may write an env value as a bare number (``A: 4``); a recipe may not."""
    if not isinstance(env, Mapping):
        return env
    return {k: str(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else x
            for k, x in env.items()}


def _type_name(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"a string ({clip_for_message(value)})"
    return f"{type(value).__name__} ({clip_for_message(value)})"
