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
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, clip_for_message, read_input_bytes
from aorta_tui.core.registry import env_entry_problem
from aorta_tui.core.suggest import did_you_mean_any
from aorta_tui.policy.presets import (
    BUILTIN_BY_NAME,
    KINDS,
    POLICY_NAME_RE,
    VENDORS,
    GpuControlSettings,
    Policy,
)

SCHEMA_VERSION = 1
TOP_KEYS = ("schema_version", "policies")
POLICY_KEYS = ("description", "kind", "vendor", "env", "harness_args", "gpu_control")
GPU_KEYS = ("clock_level", "power_limit_w")
MAX_DEPTH = 32
MAX_NODES = 100_000  # aliases can expand a small file into a huge tree ("billion laughs")
PathKey = tuple[str, ...]


class _Located:
    """Plain values plus the line (1-based) where each key path starts."""

    def __init__(self, value: Any, lines: dict[PathKey, int]) -> None:
        self.value = value
        self.lines = lines


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
    return _Validator(located, filename).policies()


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
    value = _walk(node, (), lines, 0, construct=True, filename=filename, budget=[MAX_NODES])
    return _Located(value, lines)


def _walk(node: Any, path: PathKey, lines: dict[PathKey, int], depth: int, *,
          construct: bool, budget: list[int], filename: str = "") -> Any:
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
                             budget=budget, filename=filename)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _walk(item, (*path, str(i)), lines, depth + 1, construct=construct, budget=budget,
                  filename=filename)
            for i, item in enumerate(node.value)
        ]
    if not construct:
        return node.value
    try:
        return yaml.constructor.SafeConstructor().construct_object(node)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        raise UsageError(f"{_dotted(path)}: cannot read the value "
                         f"{clip_for_message(node.value)} ({clip_for_message(str(exc))})",
                         location=where, hint="quote the value to make it a string") from None


def _dotted(path: PathKey) -> str:
    # a key is echoed at most 60 characters long: a 4 MB key makes a 4 MB message otherwise
    parts = (k if len(k) <= 60 else f"{k[:40]}... ({len(k)} characters)" for k in path)
    return ".".join(parts) if path else "(top level)"


# -- validation ----------------------------------------------------------------------------


class _Validator:
    def __init__(self, located: _Located, filename: str) -> None:
        self.doc = located.value
        self.lines = located.lines
        self.filename = filename

    def fail(self, path: PathKey, message: str, hint: str | None = None) -> UsageError:
        # The nearest ancestor with a known line gives the location.
        probe = path
        while probe not in self.lines and probe:
            probe = probe[:-1]
        line = self.lines.get(probe)
        location = f"{self.filename}:{line}" if line else self.filename
        return UsageError(f"{_dotted(path)}: {message}", location=location, hint=hint)

    def policies(self) -> list[Policy]:
        doc = self.doc
        if not isinstance(doc, Mapping):
            raise self.fail((), f"the file must be a mapping with a `policies:` key, "
                            f"got {_type_name(doc)}", hint="see docs/policy.md for the format")
        self._known_keys((), doc, TOP_KEYS)
        version = doc.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise self.fail(("schema_version",), f"must be {SCHEMA_VERSION}, got {clip_for_message(version)}")
        if "policies" not in doc:
            raise self.fail((), "missing the `policies:` mapping",
                            hint="add `policies:` with one entry per policy")
        table = doc["policies"]
        if not isinstance(table, Mapping) or not table:
            raise self.fail(("policies",), "must be a non-empty mapping of name -> definition, "
                            f"got {_type_name(table)}",
                            hint="e.g. policies: {my_policy: {env: {VAR: '1'}}}")
        return [self._policy(str(name), body) for name, body in table.items()]

    def _policy(self, name: str, body: Any) -> Policy:
        path: PathKey = ("policies", name)
        if not POLICY_NAME_RE.fullmatch(name):  # match() let "x\n" through ($)
            raise self.fail(path, "a policy name is a letter then letters, digits, '_', '.' "
                            "or '-' (at most 64 characters)")
        if name in BUILTIN_BY_NAME:
            raise self.fail(path, f"{name!r} is a built-in policy",
                            hint="pick another name; built-ins cannot be redefined")
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            raise self.fail(path, f"must be a mapping, got {_type_name(body)}",
                            hint="e.g. env: {VAR: '1'}")
        self._known_keys(path, body, POLICY_KEYS)
        description = self._string((*path, "description"), body.get("description", ""))
        kind = self._choice((*path, "kind"), body.get("kind", "custom"), KINDS)
        vendor = self._choice((*path, "vendor"), body.get("vendor", "any"), VENDORS)
        env = self._env((*path, "env"), body.get("env", {}))
        args = self._args((*path, "harness_args"), body.get("harness_args", []))
        gpu = self._gpu((*path, "gpu_control"), body.get("gpu_control", {}))
        line = self.lines.get(path)
        return Policy(name=name, description=description, kind=kind, vendor=vendor, env=env,
                      harness_args=args, gpu_control=gpu,
                      source=f"{self.filename}:{line}" if line else self.filename)

    def _known_keys(self, path: PathKey, body: Mapping[Any, Any], known: tuple[str, ...]) -> None:
        for key in body:
            if key not in known:
                raise self.fail((*path, str(key)), "unknown key",
                                hint=_key_hint(str(key), known))

    def _string(self, path: PathKey, value: Any) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string, got {_type_name(value)}")
        return value

    def _choice(self, path: PathKey, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices or not isinstance(value, str):
            raise self.fail(path, f"must be one of {', '.join(choices)}, got "
                            f"{clip_for_message(value)}",
                            hint=_key_hint(str(value)[:200], choices))
        return value

    def _env(self, path: PathKey, value: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping of VARIABLE: value, got {_type_name(value)}")
        out: dict[str, str] = {}
        for key, val in value.items():
            sub = (*path, str(key))
            if isinstance(val, bool) or val is None:
                raise self.fail(sub, f"value {clip_for_message(val)} is not a string",
                                hint=f"quote it, e.g. {key}: \"1\"")
            if isinstance(val, (int, float)):
                val = str(val)  # a policy file may write numbers bare (a recipe may not)
            # the name, NUL and size rules of every trial environment (recipe, sidecar, here)
            if (problem := env_entry_problem(key, val)) is not None:
                raise self.fail(sub, problem[0], hint=problem[1])
            out[key] = val
        return out

    def _args(self, path: PathKey, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list of strings, got {_type_name(value)}",
                            hint='e.g. harness_args: ["--stream-priority", "lc"]')
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or "\x00" in item:
                raise self.fail((*path, str(i)), f"must be a string, got {_type_name(item)}")
            out.append(item)
        for forbidden in ("-o", "--output", "--streams", "--device", "--iterations"):
            if forbidden in out or any(a.startswith(forbidden + "=") for a in out):
                raise self.fail(path, f"{forbidden} is set by the sweep itself",
                                hint="give it to `aorta-tui policy sweep` instead")
        return tuple(out)

    def _gpu(self, path: PathKey, value: Any) -> GpuControlSettings:
        if value is None:
            return GpuControlSettings()
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping, got {_type_name(value)}",
                            hint="e.g. gpu_control: {clock_level: 5, power_limit_w: 300}")
        self._known_keys(path, value, GPU_KEYS)
        level = value.get("clock_level")
        if level is not None and (not isinstance(level, int) or isinstance(level, bool)
                                  or not 0 <= level <= 7):
            raise self.fail((*path, "clock_level"), f"must be an integer 0..7, got {clip_for_message(level)}")
        watts = value.get("power_limit_w")
        if watts is not None and (not isinstance(watts, int) or isinstance(watts, bool)
                                  or not 10 <= watts <= 5000):
            raise self.fail((*path, "power_limit_w"),
                            f"must be an integer number of watts (10..5000), got {clip_for_message(watts)}")
        return GpuControlSettings(clock_level=level, power_limit_w=watts)


def _key_hint(key: str, known: tuple[str, ...]) -> str:
    return did_you_mean_any(key, known, cutoff=0.5, joiner=" or ") or f"known: {', '.join(known)}"


def _type_name(value: Any) -> str:
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
