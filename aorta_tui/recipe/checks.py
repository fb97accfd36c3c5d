"""The recipe validator's primitives, below everything that checks a setting.

``Validator`` records located :class:`RecipeIssue` s and carries on; its checks (types,
ranges, mappings, environment entries) are what a recipe, a workload's ``workload_config``
(registry/workload.py), a policy file and a sanitizer recipe are checked with. The rules for
an environment variable, a container image and combined mitigations live here too, because
the registries' sidecar files and the recipe apply the same ones. Nothing here imports a
registry, a collector or the probe catalogue: recipe/validate.py receives those through the
interface of recipe/catalogues.py.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aorta_tui.core.errors import RecipeError, UsageError
from aorta_tui.core.inputs import clip_for_message
from aorta_tui.core.secrets import is_secret_name
from aorta_tui.core.suggest import did_you_mean
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.loader import Marks, child_path


class NamedEnv(Protocol):
    """A mitigation as :func:`mitigation_env` reads it (registry/registry.py's Mitigation)."""

    @property
    def name(self) -> str: ...
    @property
    def env(self) -> Mapping[str, str]: ...


class RegistryView(Protocol):
    """What validation reads of a registry (registry/registry.py's ``Registry`` fills it)."""

    @property
    def mitigations(self) -> Mapping[str, NamedEnv]: ...
    @property
    def environments(self) -> Mapping[str, Any]: ...
    @property
    def workload_names(self) -> frozenset[str]: ...


ENV_NAME_RE = re.compile(K.ENV_NAME_PATTERN)  # one pattern for every environment name


MAX_ISSUES = 50  # beyond this the recipe is not a recipe; report how many more there were


MAX_MESSAGE_CHARS = 400  # a message about a 4 MB value must not echo it (see _clip_text)


@dataclass(frozen=True)
class RecipeIssue:
    """One problem: 1-based position (0 when unknown), key path, message and a fix."""

    line: int
    column: int
    path: str
    message: str
    hint: str | None = None

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}:{self.column}" if self.line else source
        head = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        return f"{head} (fix: {self.hint})" if self.hint else head

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "column": self.column, "path": self.path,
                "message": self.message, "hint": self.hint}


class RecipeValidationError(RecipeError):
    """A :class:`RecipeError` that also carries every :class:`RecipeIssue` found."""

    def __init__(self, issues: list[RecipeIssue], source: str, *, more: int = 0) -> None:
        self.issues = sorted(issues, key=lambda i: (i.line, i.column))
        self.source = source
        self.more = more
        first = self.issues[0]
        if len(self.issues) == 1:
            where = f"{source}:{first.line}:{first.column}" if first.line else source
            message = f"{first.path}: {first.message}" if first.path else first.message
            super().__init__(message, hint=first.hint, location=where)
        else:
            lines = [f"{len(self.issues) + more} problems in the recipe:"]
            lines += [f"  - {issue.render(source)}" for issue in self.issues]
            if more:
                lines.append(f"  ... and {more} more (fix the ones above first)")
            super().__init__("\n".join(lines))


class Bad(enum.Enum):
    """Marks a value that failed validation (an issue has been recorded). An enum of one
    member, so that ``x is BAD`` narrows ``T | Bad`` to ``T`` for the type checker."""

    BAD = "<invalid>"

    def __repr__(self) -> str:
        return "<invalid>"

    def __str__(self) -> str:
        return "<invalid>"


BAD: Final = Bad.BAD


def type_name(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _clip_text(text: str) -> str:
    """A message or hint cut to ``MAX_MESSAGE_CHARS``: a problem with a huge value stays short."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return f"{text[: MAX_MESSAGE_CHARS - 40]}... ({len(text)} characters in all)"


def _num(x: float) -> str:
    """2592000 rather than 2.592e+06; 1e+30 stays short."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:g}"


def _range_hint(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"use a whole number from {minimum} to {maximum}"
    if minimum is not None:
        return f"use a value >= {minimum}"
    return f"use a value <= {maximum}"


class Validator:
    def __init__(self, marks: Marks, source: str, registry: RegistryView | None) -> None:
        self.marks = marks
        self.source = source
        self.registry = registry
        self.issues: list[RecipeIssue] = []
        self.more = 0  # issues beyond MAX_ISSUES, counted but not kept

    # -- recording -------------------------------------------------------------------------
    def issue(self, path: str, message: str, hint: str | None = None, *, key: bool = False) -> Bad:
        if len(self.issues) >= MAX_ISSUES:
            self.more += 1
            return BAD
        line, col = self.marks.at(path, key=key)
        self.issues.append(RecipeIssue(line, col, _clip_text(path), _clip_text(message),
                                       None if hint is None else _clip_text(hint)))
        return BAD

    def quote_hint(self, path: str, value: object) -> str | None:
        """For a scalar YAML did not read as a string: how to make it one."""
        written = self.marks.raw.get(path)
        if value is None:
            return "write a value, or remove the key"
        if written is None or isinstance(value, (list, dict)):
            return None
        if len(written) > 60:
            return f"YAML reads this as {type_name(value)}; quote it to make it a string"
        return f"YAML reads {written} as {type_name(value)}; quote it: \"{written}\""

    # -- shapes ----------------------------------------------------------------------------
    def mapping(self, path: str, value: object, allowed: frozenset[str], *,
                what: str = "a mapping", extra_hint: dict[str, str] | None = None
                ) -> dict[Any, Any] | Bad:
        if not isinstance(value, dict):
            return self.issue(path, f"expected {what}, got {type_name(value)}",
                              f"write it as `key: value` lines indented under {path or 'the top'}")
        ok = True
        for k in value:
            if len(self.issues) >= MAX_ISSUES and (not isinstance(k, str) or k not in allowed):
                self.more += 1  # no did-you-mean search for the thousandth bad key
                ok = False
                continue
            sub = child_path(path, str(k))
            if not isinstance(k, str):
                self.issue(sub, f"keys must be words, got {type_name(k)} {k!r}",
                           f"allowed keys: {', '.join(sorted(allowed))}", key=True)
                ok = False
            elif k not in allowed:
                if extra_hint and k in extra_hint:
                    self.issue(sub, f"key {k!r} is not allowed here", extra_hint[k], key=True)
                else:
                    self.issue(sub, f"unknown key {k!r}",
                               did_you_mean(k, allowed)
                               + f"allowed here: {', '.join(sorted(allowed))}", key=True)
                ok = False
        return value if ok else {k: v for k, v in value.items() if k in allowed}

    def require(self, path: str, data: dict[str, Any], key: str, hint: str) -> bool:
        if key not in data or data[key] is None:
            what = "is missing" if key not in data else "is null"
            self.issue(child_path(path, key) if key in data else path,
                       f"required key {key!r} {what}", hint)
            return False
        return True

    def integer(self, path: str, value: object, *, minimum: float | None = None,
                maximum: float | None = None, unit: str = "") -> int | Bad:
        if isinstance(value, bool) or not isinstance(value, int):
            hint = "write a whole number without quotes"
            if isinstance(value, float) and value.is_integer():
                hint = f"write {int(value)} (no decimal point)"
            return self.issue(path, f"expected an integer{f' ({unit.strip()})' if unit else ''}, got "
                              f"{type_name(value)} ({clip_for_message(value)})", hint)
        if minimum is not None and value < minimum:
            return self.issue(path, f"must be at least {minimum}{unit}, got {value}",
                              _range_hint(minimum, maximum))
        if maximum is not None and value > maximum:
            return self.issue(path, f"must be at most {maximum}{unit}, got {value}",
                              _range_hint(minimum, maximum))
        return value

    def number(self, path: str, value: object, *, above: float | None = None,
               at_least: float | None = None, at_most: float | None = None, unit: str = ""
               ) -> float | Bad:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = "write a number without quotes"
            if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9]+[eE][-+]?[0-9]+", value):
                hint = "YAML reads an exponent without a '.' as text: write it as 1.0e+3"
            return self.issue(path, f"expected a number{' of' + unit if unit else ''}, got "
                              f"{type_name(value)} ({clip_for_message(value)})", hint)
        low = f"> {_num(above)}" if above is not None else f">= {_num(at_least)}" \
            if at_least is not None else None
        high = f"<= {_num(at_most)}" if at_most is not None else None
        span = " and ".join(x for x in (low, high) if x)
        fix = f"use a value {span}{unit}" if span else "use a finite value"
        if isinstance(value, float) and not math.isfinite(value):
            return self.issue(path, f"must be a finite number, got {value}", fix)
        if above is not None and value <= above:
            return self.issue(path, f"must be greater than {_num(above)}, got {_num(value)}", fix)
        if at_least is not None and value < at_least:
            return self.issue(path, f"must be at least {_num(at_least)}, got {_num(value)}", fix)
        if at_most is not None and value > at_most:
            return self.issue(path, f"must be at most {_num(at_most)}{unit}, got {_num(value)}",
                              fix)
        return float(value)

    def string(self, path: str, value: object, *, nonempty: bool = True, hint: str | None = None
               ) -> str | Bad:
        if not isinstance(value, str):
            return self.issue(path, f"expected a string, got {type_name(value)} ({value!r})",
                              self.quote_hint(path, value) or hint or "quote the value")
        if nonempty and not value.strip():
            return self.issue(path, "must not be empty", hint or "write a value or remove the key")
        if "\x00" in value:
            return self.issue(path, "contains a NUL character", "remove it")
        return value

    def boolean(self, path: str, value: object) -> bool | Bad:
        if not isinstance(value, bool):
            return self.issue(path, f"expected true or false, got {type_name(value)} "
                              f"({value!r})", "write true or false without quotes")
        return value

    def choice(self, path: str, value: object, choices: Iterable[str]) -> str | Bad:
        options = tuple(choices)
        if not isinstance(value, str) or value not in options:
            near = did_you_mean(value, options).rstrip() if isinstance(value, str) else ""
            return self.issue(path, f"expected one of {', '.join(options)}, got {value!r}",
                              near or f"use one of {', '.join(options)}")
        return value

    def str_list(self, path: str, value: object, *, nonempty: bool = False, what: str = "names"
                 ) -> list[str] | Bad:
        if not isinstance(value, list):
            hint = f"write a list: [{value}]" if isinstance(value, str) else \
                f"write a list of {what}: [a, b]"
            return self.issue(path, f"expected a list of {what}, got {type_name(value)}", hint)
        if nonempty and not value:
            return self.issue(path, f"must list at least one of the {what}",
                              f"add {what} to the list")
        out: list[str] = []
        ok = True
        for i, item in enumerate(value):
            item_ok = self.string(child_path(path, i), item, hint=f"each entry is one of the {what}")
            if item_ok is BAD:
                ok = False
            else:
                out.append(item_ok)
        return out if ok else BAD

    def env_map(self, path: str, value: object) -> dict[str, str] | Bad:
        if value is None:
            return {}
        if not isinstance(value, dict):
            return self.issue(path, f"expected a mapping of VARIABLE: \"value\", got "
                              f"{type_name(value)}", "write one `NAME: \"value\"` per line")
        out: dict[str, str] = {}
        ok = True
        for k, v in value.items():
            sub = child_path(path, str(k))
            if not isinstance(k, str) or not ENV_NAME_RE.fullmatch(k):
                self.issue(sub, f"{k!r} is not a valid environment variable name",
                           "names are letters, digits and _ and do not start with a digit",
                           key=True)
                ok = False
                continue
            if not isinstance(v, str):
                shown = "" if is_secret_name(k) else f" ({clip_for_message(v)})"
                self.issue(sub, f"the value must be a string, got {type_name(v)}{shown}",
                           "quote the value" if not shown else self.quote_hint(sub, v)
                           or "quote the value")
                ok = False
                continue
            if "\x00" in v:
                self.issue(sub, "the value contains a NUL character", "remove it")
                ok = False
                continue
            problem = env_entry_problem(k, v)
            if problem is not None:  # e.g. longer than execve takes
                self.issue(sub, problem[0], problem[1])
                ok = False
                continue
            out[k] = v
        return out if ok else BAD

    def json_data(self, path: str, value: object, depth: int = 0) -> bool:
        """Free-form data (workload_config): strings, finite numbers, booleans, null, nests."""
        if value is None or isinstance(value, (str, bool, int)):
            return True
        if isinstance(value, float):
            if math.isfinite(value):
                return True
            self.issue(path, f"{value} is not a finite number", "use a finite number")
            return False
        if isinstance(value, list):
            return all([self.json_data(child_path(path, i), v, depth + 1)
                        for i, v in enumerate(value)])
        if isinstance(value, dict):
            ok = True
            for k, v in value.items():
                if not isinstance(k, str):
                    self.issue(child_path(path, str(k)), f"keys must be strings, got "
                               f"{type_name(k)} {k!r}", f"quote the key: \"{k}\"", key=True)
                    ok = False
                elif not self.json_data(child_path(path, k), v, depth + 1):
                    ok = False
            return ok
        self.issue(path, f"unsupported value {value!r} ({type(value).__name__})",
                   "use strings, numbers, booleans, lists and mappings")
        return False


# An image reference as docker parses it: [registry[:port]/]name[/name...][:tag][@digest], the
# name in lower case. A value outside this grammar never reaches `docker run`: one starting with
# '-' would be read as an option there (`--privileged`, `--volume=/:/host`).
_REF_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"


_REF_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"


DOCKER_IMAGE_RE = re.compile(
    rf"(?:{_REF_DOMAIN}/)?{_REF_COMPONENT}(?:/{_REF_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")


MAX_IMAGE_REF = 512




def docker_image_problem(ref: object) -> tuple[str, str] | None:
    """Why ``ref`` is not a container image reference (message, fix), or None when it is."""
    fix = "write an image reference such as rocm/pytorch:latest or registry.example:5000/team/img@sha256:<digest>"
    if not isinstance(ref, str) or not ref:
        return "the image must be a non-empty string", fix
    shown = ref if len(ref) <= 60 else ref[:40] + "..."
    if ref.startswith("-"):
        return (f"{shown!r} is not an image reference: it starts with '-', so docker would read "
                "it as an option", fix)
    if len(ref) > MAX_IMAGE_REF:
        return f"the image reference is {len(ref)} characters; at most {MAX_IMAGE_REF}", fix
    if not DOCKER_IMAGE_RE.fullmatch(ref):
        why = " (the repository name must be lower case)" if ref != ref.lower() and \
            DOCKER_IMAGE_RE.fullmatch(ref.lower()) else ""
        return f"{shown!r} is not a valid image reference{why}", fix
    return None


# execve refuses one "NAME=value" string longer than this (MAX_ARG_STRLEN, E2BIG).
MAX_ENV_STRING = 128 * 1024 - 1


def env_entry_problem(name: object, value: object) -> tuple[str, str] | None:
    """Why ``name=value`` cannot be a trial's environment variable (message, fix), or None.

    One rule for recipe ``extra_env`` and sidecar ``env``: the name is a shell identifier (so
    ``probe.env`` and ``docker -e`` never see a ';' or a space in it), the value a string
    without NUL that ``execve`` accepts.
    """
    from aorta_tui.core.inputs import clip_for_message

    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        return (f"{clip_for_message(name, 60)} is not a valid environment variable name",
                "names are letters, digits and _ and do not start with a digit")
    if not isinstance(value, str):
        return (f"the value of {name} must be a string, got {type(value).__name__} "
                f"({clip_for_message(value, 60)})", 'quote the value: "2"')
    if "\x00" in value:
        return f"the value of {name} contains a NUL character", "remove it"
    if len(name) + 1 + len(value.encode("utf-8", "surrogatepass")) > MAX_ENV_STRING:
        from aorta_tui.core.secrets import mask_value

        return (f"{name}={clip_for_message(mask_value(name, value), 40)} is longer than the "
                f"{MAX_ENV_STRING + 1} "
                "bytes a process environment string may have", "pass large data in a file")
    return None


def mitigation_env(mitigations: Iterable[NamedEnv], *, where: str = "") -> dict[str, str]:
    """Combine mitigations; two that set one variable to different values is an error."""
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for m in mitigations:
        for var, value in m.env.items():
            if var in out and out[var] != value:
                from aorta_tui.core.inputs import clip_for_message
                from aorta_tui.core.secrets import mask_value

                a, b = (clip_for_message(mask_value(var, x), 60) for x in (out[var], value))
                raise UsageError(
                    f"{where + ': ' if where else ''}mitigations {owner[var]!r} and {m.name!r} set "
                    f"{var} to different values ({a} vs {b})",
                    hint="keep only one of them in this cell",
                )
            out[var] = value
            owner[var] = m.name
    return out

