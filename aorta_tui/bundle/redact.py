"""What a ticket bundle scrubs, as pure functions over text and JSON (no files, no I/O).

Two kinds of rule, applied to every text file of a bundle:

- rules that always apply: credentials in URLs (``scheme://user:password@``), the token of an
  ``Authorization:`` header or after ``Bearer``; the value of every variable whose name looks
  like a secret (the one rule of :mod:`aorta_tui.core.secrets`), wherever the name stands
  next to it (``NAME=value``,
  ``export NAME='value'``, ``NAME: value``, ``"NAME": "value"``, a JSON key's value) and, once
  seen, wherever the value itself appears (a log that printed the token); the user names in
  home directories (``/home/<user>/``, ``/Users/<user>/``);
- rules on request: the recipe's ``redaction:`` section (or ``--redaction-from``) with
  upstream AORTA's meaning (``scrub_env_keys`` globs of variable names, matched
  case-sensitively; ``scrub_paths`` absolute paths to ``<PATH:N>``; ``scrub_ip_addresses``
  addresses to ``<IPV4:N>`` / ``<IPV6:N>``, N numbered per file), and hostnames
  (``--hostnames``) to ``<HOST:N>``.

Upstream removes a ``scrub_env_keys`` variable from the environment mappings it knows; here its
value is replaced in place (``<redacted:scrub_env_keys>``), so every JSON file stays valid and
every line keeps its number.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.secrets import MASK, is_secret_name

SECRET_RULE = "secret_env"          # a secret-looking variable's value next to its name
SECRET_VALUE_RULE = "secret_value"  # such a value seen on its own (printed by a trial)
ENV_KEYS_RULE = "scrub_env_keys"
HOME_RULE = "home_user"
URL_RULE = "url_credentials"        # https://user:password@host
BEARER_RULE = "bearer_token"        # Authorization: Bearer <token>
HOST_RULE = "hostname"
PATH_RULE = "scrub_paths"
IP_RULE = "scrub_ip_addresses"
# Rules whose "before" text the review never prints (only its length).
MASKED_RULES = frozenset({SECRET_RULE, SECRET_VALUE_RULE, ENV_KEYS_RULE, HOST_RULE, URL_RULE,
                          BEARER_RULE})

SECRET_PLACEHOLDER = "<redacted:secret>"
ENV_KEYS_PLACEHOLDER = "<redacted:scrub_env_keys>"
USER_PLACEHOLDER = "<user>"

# A value seen next to a secret's name is replaced everywhere once it is this long; a shorter
# one ("1", "yes") would rewrite unrelated text, so it is replaced only next to its name.
MIN_LITERAL_CHARS = 6

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# NAME=value as a shell, an env file or a log writes it: 'single', "double" or bare (to the
# next blank, quote, comma, semicolon or bracket). The name must start a word.
_ASSIGN_RE = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<name>{_NAME})=(?P<value>'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\""
    r"|[^\s'\",;()\[\]{}|<>`]+)")
# "NAME": "value" (JSON written on one line, or a line of a JSON file read as text).
_JSON_PAIR_RE = re.compile(rf"\"(?P<name>{_NAME})\"\s*:\s*(?P<value>\"(?:[^\"\\\n]|\\.)*\")")
# NAME: value as YAML writes a mapping entry (at a line start, after indentation or "- ").
_YAML_PAIR_RE = re.compile(
    rf"^(?P<lead>[ \t]*(?:-[ \t]+)?)(?P<name>{_NAME}):[ \t]+(?P<value>[^\s#][^\n]*?)[ \t]*$",
    re.MULTILINE)
_VAR_REF_RE = re.compile(rf"\$(?:{_NAME}|\{{{_NAME}\}})")
# user:password@ of a URL (a git remote, a proxy, a model hub mirror)
_URL_CRED_RE = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/\s@:\"'<>]+:[^/\s@\"'<>]+)@")
# the token of an Authorization header as a log or a curl -v prints it
_BEARER_RE = re.compile(
    r"(?P<lead>\bAuthorization:\s*(?:(?:Bearer|Basic|token)\s+)?|\bBearer\s+)"
    r"(?P<tok>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
_HOME_RE = re.compile(r"(?P<root>/home/|/Users/)(?P<user>[^/\s\"'<>:;,]+)(?=/|[\s\"'<>:;,]|$)")

# Upstream AORTA's path grammar: an absolute POSIX path with at least one directory component,
# anchored at a path start.
_PATH_RE = re.compile(r"(?<![A-Za-z0-9_.-])/(?:[A-Za-z0-9_.\-]+/)+[A-Za-z0-9_.\-]+")
_IPV4_RE = re.compile(
    r"\b(?:(?:25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(?:25[0-5]|2[0-4]\d|[01]?\d\d?)\b")
_IPV6_RE = re.compile(
    r"(?<![0-9a-fA-F:.])(?:(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4})(?![0-9a-fA-F:.])")


@dataclass(frozen=True)
class RedactionConfig:
    """The rules of one bundle: the recipe's section merged with ``--redaction-from``."""

    scrub_env_keys: tuple[str, ...] = ()
    scrub_paths: bool = False
    scrub_ip_addresses: bool = False
    hostnames: tuple[str, ...] = ()  # scrubbed only when --hostnames asked for it

    def merged(self, other: RedactionConfig) -> RedactionConfig:
        """Both sets of rules: a bundle scrubs what either asks for (never less)."""
        keys = tuple(dict.fromkeys((*self.scrub_env_keys, *other.scrub_env_keys)))
        hosts = tuple(dict.fromkeys((*self.hostnames, *other.hostnames)))
        return RedactionConfig(keys, self.scrub_paths or other.scrub_paths,
                               self.scrub_ip_addresses or other.scrub_ip_addresses, hosts)

    def to_dict(self) -> dict[str, Any]:
        return {"scrub_env_keys": list(self.scrub_env_keys), "scrub_paths": self.scrub_paths,
                "scrub_ip_addresses": self.scrub_ip_addresses,
                "hostnames": len(self.hostnames)}  # how many, never which


@dataclass(frozen=True)
class Hit:
    """One redaction: which rule, where (1-based line, or a JSON path), what became what."""

    rule: str
    line: int
    before: str
    after: str
    where: str = ""  # the JSON path of the value, for JSON files

    def shown_before(self) -> str:
        """The ``before`` text fit to print: a secret, a user name or a hostname shows only its
        length (a review is pasted into tickets too); paths and addresses show as they are."""
        if self.rule == HOME_RULE:
            root = "/Users/" if self.before.startswith("/Users/") else "/home/"
            return f"{root}<{len(self.before) - len(root)} chars>"
        return f"<{len(self.before)} chars>" if self.rule in MASKED_RULES else self.before


@dataclass
class Scrubber:
    """The rules, plus the secret values found so far (:meth:`learn`) for literal replacement."""

    config: RedactionConfig
    values: dict[str, str] = field(default_factory=dict)  # value -> rule that found it

    # -- what is a value to hide -----------------------------------------------------------
    def name_rule(self, name: str) -> str | None:
        """The rule that hides ``name``'s value, or None."""
        if is_secret_name(name):
            return SECRET_RULE
        if any(fnmatch.fnmatchcase(name, g) for g in self.config.scrub_env_keys):
            return ENV_KEYS_RULE
        return None

    def learn(self, value: str, rule: str) -> None:
        if len(value) >= MIN_LITERAL_CHARS and not _kept(value) and value not in self.values:
            self.values[value] = SECRET_VALUE_RULE if rule == SECRET_RULE else rule

    def learn_text(self, text: str) -> None:
        """Remember every value that stands next to a hidden name in ``text``."""
        for regex in (_ASSIGN_RE, _JSON_PAIR_RE, _YAML_PAIR_RE):
            for m in regex.finditer(text):
                rule = self.name_rule(m.group("name"))
                if rule is not None:
                    self.learn(_unquote(m.group("value")), rule)
        for m in _URL_CRED_RE.finditer(text):  # the password of user:password@
            self.learn(m.group("cred").split(":", 1)[1], SECRET_RULE)
        for m in _BEARER_RE.finditer(text):
            self.learn(m.group("tok"), SECRET_RULE)

    def learn_json(self, doc: Any) -> None:
        """Remember the values of hidden names in a parsed JSON document (any depth)."""
        for _path, name, value in _named_strings(doc):
            rule = self.name_rule(name)
            if rule is not None:
                self.learn(value, rule)

    # -- rewriting -------------------------------------------------------------------------
    def scrub_text(self, text: str, state: FileState) -> tuple[str, list[Hit]]:
        """``text`` with every rule applied, line by line, and what changed on which line."""
        hits: list[Hit] = []
        out: list[str] = []
        for number, line in enumerate(split_lines(text), start=1):
            new, line_hits = self.scrub_line(line, state, number)
            out.append(new)
            hits.extend(line_hits)
        return "".join(out), hits

    def scrub_name(self, name: str) -> str:
        """A path inside the archive with secrets, user names and (on request) hostnames
        replaced; paths and addresses stay, so the layout of the run directory does."""
        hits: list[Hit] = []
        name = self._literals(name, 0, hits)
        if self.config.hostnames:
            name = _sub(_host_regex(self.config.hostnames), name, 0, hits, HOST_RULE,
                        lambda m: "HOST")
        return _sub(_HOME_RE, "/" + name, 0, hits, HOME_RULE,
                    lambda m: f"{m.group('root')}{USER_PLACEHOLDER}")[1:]

    def scrub_line(self, line: str, state: FileState, number: int) -> tuple[str, list[Hit]]:
        hits: list[Hit] = []
        line = self._assignments(line, number, hits)
        line = self._literals(line, number, hits)
        line = _sub(_URL_CRED_RE, line, number, hits, URL_RULE,
                    lambda m: f"{m.group('scheme')}{SECRET_PLACEHOLDER}@")
        line = _sub(_BEARER_RE, line, number, hits, BEARER_RULE,
                    lambda m: f"{m.group('lead')}{SECRET_PLACEHOLDER}")
        if self.config.hostnames:
            line = outside_placeholders(line, lambda part: _sub(
                _host_regex(self.config.hostnames), part, number, hits, HOST_RULE,
                lambda m: f"<HOST:{state.index('host', m.group(0).lower())}>"))
        if self.config.scrub_paths:
            line = _sub(_PATH_RE, line, number, hits, PATH_RULE,
                        lambda m: f"<PATH:{state.index('path', m.group(0))}>")
        line = _sub(_HOME_RE, line, number, hits, HOME_RULE,
                    lambda m: f"{m.group('root')}{USER_PLACEHOLDER}")
        if self.config.scrub_ip_addresses:
            line = _sub(_IPV6_RE, line, number, hits, IP_RULE, lambda m: _ip(m, state, 6))
            line = _sub(_IPV4_RE, line, number, hits, IP_RULE, lambda m: _ip(m, state, 4))
        return line, hits

    def _assignments(self, line: str, number: int, hits: list[Hit]) -> str:
        for regex in (_ASSIGN_RE, _JSON_PAIR_RE, _YAML_PAIR_RE):
            def repl(m: re.Match[str]) -> str:
                rule = self.name_rule(m.group("name"))
                value = _unquote(m.group("value"))
                if rule is None or _kept(value):
                    return m.group(0)
                placeholder = _placeholder(rule)
                quoted = _requote(m.group("value"), placeholder)
                hits.append(Hit(rule, number, value, placeholder))
                start, end = m.span("value")
                whole = m.group(0)
                base = m.start(0)
                return whole[: start - base] + quoted + whole[end - base:]
            line = regex.sub(repl, line)
        return line

    def _literals(self, line: str, number: int, hits: list[Hit]) -> str:
        # Longest first, so a value that contains another is replaced whole; never inside a
        # placeholder already written (a secret "redact" must not eat "<redacted:secret>").
        for value in sorted(self.values, key=len, reverse=True):
            if value in line:
                rule = self.values[value]
                placeholder = _placeholder(rule)

                def replace(part: str, value: str = value, rule: str = rule,
                            placeholder: str = placeholder) -> str:
                    hits.extend(Hit(rule, number, value, placeholder)
                                for _ in range(part.count(value)))
                    return part.replace(value, placeholder)
                line = outside_placeholders(line, replace)
        return line

    def scrub_json(self, doc: Any, state: FileState) -> tuple[Any, list[tuple[str, Hit]]]:
        """A copy of ``doc`` with hidden names' values replaced and every string leaf (keys
        included) scrubbed as text; each hit with the JSON path it was found at."""
        hits: list[tuple[str, Hit]] = []

        def walk(node: Any, path: str, hidden_by: str | None) -> Any:
            if isinstance(node, dict):
                out: dict[str, Any] = {}
                for key, value in node.items():
                    sub = f"{path}.{key}" if path else str(key)
                    rule = self.name_rule(key) if isinstance(key, str) else None
                    # an env snapshot keeps a variable as {"value": ..., "state": ...}
                    inner = hidden_by if key == "value" else rule
                    # a variable's name is kept as it is (a value may be a part of it: SECRET)
                    new_key = key if rule is not None or not isinstance(key, str) else \
                        self._leaf(key, sub, state, hits)
                    out[new_key] = walk(value, sub, inner)
                return out
            if isinstance(node, list):
                return [walk(v, f"{path}[{i}]", None) for i, v in enumerate(node)]
            if isinstance(node, str):
                if hidden_by is not None and not _kept(node):
                    placeholder = _placeholder(hidden_by)
                    hits.append((path, Hit(hidden_by, 0, node, placeholder, path)))
                    return placeholder
                return self._leaf(node, path, state, hits)
            return node

        return walk(doc, "", None), hits

    def _leaf(self, text: str, path: str, state: FileState, hits: list[tuple[str, Hit]]) -> str:
        new, line_hits = self.scrub_line(text, state, 0)
        hits.extend((path, Hit(h.rule, 0, h.before, h.after, path)) for h in line_hits)
        return new


@dataclass
class FileState:
    """Per-file numbering of placeholders: the same path is the same ``<PATH:N>`` in a file."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    def index(self, kind: str, value: str) -> int:
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = self.counts[kind]
            self.counts[kind] += 1
        return self.seen[key]


_PLACEHOLDER_RE = re.compile(
    r"<(?:redacted:[a-z_]+|PATH:\d+|IPV[46]:\d+|HOST:\d+|user|masked: secret)>")


def outside_placeholders(line: str, fn: Callable[[str], str]) -> str:
    """``fn`` applied to the parts of ``line`` between the placeholders written so far."""
    out: list[str] = []
    pos = 0
    for m in _PLACEHOLDER_RE.finditer(line):
        out.append(fn(line[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(fn(line[pos:]))
    return "".join(out)


def split_lines(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` only (str.splitlines also cuts at \\f, \\x1c, U+2028
    ..., which would shift the line numbers a review prints); the pieces join back to it."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _kept(value: str) -> bool:
    """True for a value that is no secret: empty, already masked, or a reference to a
    variable (``token=$HF_TOKEN`` in a command names the secret, it does not hold it)."""
    return (not value or value in (MASK, SECRET_PLACEHOLDER, ENV_KEYS_PLACEHOLDER)
            or _VAR_REF_RE.fullmatch(value) is not None)


def _placeholder(rule: str) -> str:
    return ENV_KEYS_PLACEHOLDER if rule == ENV_KEYS_RULE else SECRET_PLACEHOLDER


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        inner = raw[1:-1]
        if raw[0] == '"':
            try:
                return str(json.loads(raw))
            except ValueError:
                return inner
        return inner
    return raw


def _requote(raw: str, placeholder: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return f"{raw[0]}{placeholder}{raw[0]}"
    return placeholder


def _sub(regex: re.Pattern[str], line: str, number: int, hits: list[Hit], rule: str,
         make: Callable[[re.Match[str]], str | None]) -> str:
    def repl(m: re.Match[str]) -> str:
        new = make(m)
        if new is None or new == m.group(0):
            return m.group(0)
        hits.append(Hit(rule, number, m.group(0), new))
        return new
    return regex.sub(repl, line)


def _ip(m: re.Match[str], state: FileState, version: int) -> str | None:
    try:
        addr = ipaddress.ip_address(m.group(0))
    except ValueError:
        return None
    if addr.version != version:
        return None
    return f"<IPV{version}:{state.index(f'ip{version}', m.group(0))}>"


_HOST_CACHE: dict[tuple[str, ...], re.Pattern[str]] = {}


def _host_regex(hosts: tuple[str, ...]) -> re.Pattern[str]:
    if hosts not in _HOST_CACHE:
        words = sorted({h for h in hosts if h}, key=len, reverse=True)
        alternatives = "|".join(re.escape(w) for w in words)
        # a whole word: not inside a longer name (letters, digits, '-', '_' on either side)
        _HOST_CACHE[hosts] = re.compile(rf"(?<![A-Za-z0-9_-])(?:{alternatives})(?![A-Za-z0-9_-])",
                                        re.IGNORECASE)
    return _HOST_CACHE[hosts]


def _named_strings(doc: Any) -> Iterable[tuple[str, str, str]]:
    """(path, name, value) for every string under a name: ``{"NAME": "v"}`` and the env
    snapshot's ``{"NAME": {"value": "v"}}``."""
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                sub = f"{path}.{key}"
                if isinstance(value, str) and isinstance(key, str):
                    yield sub, key, value
                elif isinstance(value, dict) and isinstance(value.get("value"), str) \
                        and isinstance(key, str):
                    yield sub, key, value["value"]
                stack.append((sub, value))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(node))
