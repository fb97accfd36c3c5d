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

Detection does not depend on the environment of the shell that bundles: the token formats of
a maintained scanner (detect-secrets' regex plugins: GitHub, Slack, AWS access keys, JWTs, ...,
imported only when a bundle is made), private-key blocks whole, ``key = value`` pairs whose key
names a secret when the value looks random (Shannon entropy), passwords of URLs (``@`` and
``/`` inside them included), and the values the trials ran with, recognised by the keyed
hashes the sweep kept (:mod:`aorta_tui.core.secrets`). Every value one of these finds is
learned first (a bundle's first pass reads every file) and then hidden wherever it appears.

Upstream removes a ``scrub_env_keys`` variable from the environment mappings it knows; here its
value is replaced in place (``<redacted:scrub_env_keys>``), so every JSON file stays valid and
every line keeps its number.
"""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.bundle.detectors import (
    ENCODED_RULE,
    FORMAT_RULE,
    KEYED_RULE,
    escaped_forms,
    find_values,
    finditer_near,
    is_count,
    is_number,
    key_strength,
)
from aorta_tui.bundle.scanner import SCANNER_PREFIX, scanner_findings
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.core.secrets import (
    MASK,
    MIN_SECRET_CHARS,
    SecretHashes,
    is_secret_name,
    secret_hash,
)

SECRET_RULE = "secret_env"          # a secret-looking variable's value next to its name
SECRET_VALUE_RULE = "secret_value"  # such a value seen on its own (printed by a trial)
ENV_KEYS_RULE = "scrub_env_keys"
HOME_RULE = "home_user"
URL_RULE = "url_credentials"        # https://user:password@host
BEARER_RULE = "bearer_token"        # Authorization: Bearer <token>
HOST_RULE = "hostname"
PATH_RULE = "scrub_paths"
IP_RULE = "scrub_ip_addresses"
KEYWORD_RULE = "secret_keyword"     # aws_secret_access_key = <random-looking value>
PRIVATE_KEY_RULE = "private_key"    # -----BEGIN ... PRIVATE KEY----- ... -----END ...
TRIAL_SECRET_RULE = "trial_secret"  # a value whose keyed hash the sweep kept
# Rules whose "before" text the review never prints (only its length); a scanner's rules too.
MASKED_RULES = frozenset({SECRET_RULE, SECRET_VALUE_RULE, ENV_KEYS_RULE, HOST_RULE, URL_RULE,
                          BEARER_RULE, KEYWORD_RULE, PRIVATE_KEY_RULE, TRIAL_SECRET_RULE,
                          KEYED_RULE, ENCODED_RULE})

SECRET_PLACEHOLDER = "<redacted:secret>"
# JSON keys whose string value is a name the recipe chose: scrubbed, it stays distinct (#N)
NAMED_KEYS = frozenset({"cell", "ticket", "cell_name", "mitigation"})
ENV_KEYS_PLACEHOLDER = "<redacted:scrub_env_keys>"
USER_PLACEHOLDER = "<user>"

# A value seen next to a secret's name is replaced everywhere once it is this long; a shorter
# one ("1", "yes") would rewrite unrelated text, so it is replaced only next to its name.
MIN_LITERAL_CHARS = MIN_SECRET_CHARS
# a number shorter than this is never hidden on its own (only next to its name): 131072 is
# a buffer size and a sequence length as often as a token count
MIN_NUMBER_CHARS = 8
BLOCK_LINES = 256
# secret_keyword: a value next to a secret's name, written with blanks around `=` or `:` (or a
# header's `X-Api-Key:`), is hidden when it is this long and looks random: its Shannon entropy
# per character at least this (`changeme1` has 2.9, a 16-character random token about 3.8).
KEYWORD_MIN_CHARS = 8
KEYWORD_MIN_ENTROPY = 3.0

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# NAME=value as a shell, an env file or a log writes it: 'single', "double" or bare (to the
# next blank, quote, comma, semicolon or bracket). The name must start a word.
_ASSIGN_RE = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<name>{_NAME})=(?P<value>'[^'\n]*'|\"(?:[^\"\\\n]|\\[^\n])*\""
    r"|[^\s'\",;()\[\]{}|<>`\x00]+)")
# "NAME": "value" (JSON written on one line, or a line of a JSON file read as text).
_JSON_PAIR_RE = re.compile(rf"\"(?P<name>{_NAME})\"[ \t]*:[ \t]*(?P<value>\"(?:[^\"\\\n]|\\[^\n])*\")")
# NAME: value as YAML writes a mapping entry (at a line start, after indentation or "- ").
_YAML_PAIR_RE = re.compile(
    rf"^(?P<lead>[ \t]*(?:-[ \t]+)?)(?P<name>{_NAME}):[ \t]+(?P<value>[^\s#][^\n]*?)[ \t]*$",
    re.MULTILINE)
_NAME_RE = re.compile(_NAME)
# The same three, for names that can be a secret's only: each such name holds one of these
# (core/secrets.py's words, camelCase included), so the millions of `step=1` a log prints
# fail inside the regex engine instead of in Python. Used when no scrub_env_keys glob could
# name any other variable.
_SECRETISH = r"(?=[A-Za-z0-9_]*?(?i:token|secret|passw|passphrase|credential|cookie|key))"
_CORE_WORDS = ("token", "secret", "passw", "passphrase", "credential", "cookie", "key")
_SECRET_PAIR_RES = tuple(re.compile(rx.pattern.replace("(?P<name>", _SECRETISH + "(?P<name>", 1),
                                    rx.flags) for rx in (_ASSIGN_RE, _JSON_PAIR_RE, _YAML_PAIR_RE))
_VAR_REF_RE = re.compile(rf"\$(?:{_NAME}|\{{{_NAME}\}})")
# user:password@ of a URL (a git remote, a proxy, a model hub mirror): where the password
# ends is decided by url_credentials (it may hold '@' and '/')
_URL_START_RE = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s@:\"'<>]*):(?P<rest>[^\s\"'<>]+)")
_URL_HOST_RE = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]+)(?::\d*)?(?![A-Za-z0-9._~%@:-])")
# NAME = value, NAME: value, NAME := value, NAME => value, 'NAME' => 'value' (secret_keyword)
_KEYWORD_RE = re.compile(
    r"(?<![A-Za-z0-9_.-])(?=[A-Za-z0-9_.-]*?(?i:token|secret|passw|passphrase|credential|cookie"
    r"|key))(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*(?::=|=>|=|:)[ \t]*"
    r"[\"']?(?P<value>[^\s\"'`,;()\[\]{}<>|\x00]+)")
# a private key's armour (PEM, OpenSSH) and a PuTTY key file's first line
_PEM_BEGIN_RE = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")
_PUTTY_RE = re.compile(r"PuTTY-User-Key-File-\d+:")
_PUTTY_END = "Private-MAC:"
# the token of an Authorization header as a log or a curl -v prints it
_BEARER_RE = re.compile(
    r"(?P<lead>\bAuthorization:[ \t]*(?:(?:Bearer|Basic|token)[ \t]+)?|\bBearer[ \t]+)"
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
        masked = self.rule in MASKED_RULES or self.rule.startswith((SCANNER_PREFIX, FORMAT_RULE))
        return f"<{len(self.before)} chars>" if masked else self.before


@dataclass
class Scrubber:
    """The rules, plus the secret values found so far (:meth:`learn`) for literal replacement."""

    config: RedactionConfig
    values: dict[str, str] = field(default_factory=dict)  # value -> rule that found it
    # the keyed hashes of the values the trials ran with (one per run: each has its own salt)
    ledgers: list[SecretHashes] = field(default_factory=list)
    _literal_re: tuple[int, re.Pattern[str] | None] = (-1, None)
    aliases: dict[str, int] = field(default_factory=dict)  # scrubbed names -> their #N

    # -- what is a value to hide -----------------------------------------------------------
    def name_rule(self, name: str) -> str | None:
        """The rule that hides ``name``'s value, or None."""
        return _name_rule(name, self.config.scrub_env_keys)

    def _pair_regexes(self) -> tuple[re.Pattern[str], ...]:
        if self.config.scrub_env_keys:
            return (_ASSIGN_RE, _JSON_PAIR_RE, _YAML_PAIR_RE)
        return _SECRET_PAIR_RES

    def learn(self, value: str, rule: str) -> None:
        # a number is no secret to hide everywhere: 131072 under num_tokens would take every
        # buffer size and sequence length of the run with it
        if len(value) >= MIN_LITERAL_CHARS and not _kept(value) and value not in self.values \
                and not (is_number(value) and len(value) < MIN_NUMBER_CHARS) \
                and _PLACEHOLDER_RE.search(value) is None:
            self.values[value] = SECRET_VALUE_RULE if rule == SECRET_RULE else rule

    def holds_value(self, text: str) -> bool:
        """Whether ``text`` shows a value learned so far."""
        regex = self._literal_regex()
        return regex is not None and regex.search(text) is not None

    def learn_text(self, text: str) -> None:
        """Remember every secret value ``text`` shows: next to a hidden name, in a URL or a
        header, in a format the scanner knows, random-looking next to a secret's name, or one
        whose keyed hash a trial's run kept."""
        for regex in self._pair_regexes():
            for m in _pair_matches(regex, text):
                rule = self.name_rule(m.group("name"))
                value = _unquote(m.group("value"))
                if rule is not None and not is_count(m.group("name"), value):
                    self.learn(value, rule)
        for _start, _end, password in url_credentials(text):  # the password of user:password@
            self.learn(password, URL_RULE)
        for m in _BEARER_RE.finditer(text):
            self.learn(m.group("tok"), BEARER_RULE)
        for m in finditer_near(_KEYWORD_RE, text, _CORE_WORDS, "[A-Za-z0-9_.-]"):
            value = m.group("value")
            if is_secret_name(m.group("name")) and looks_random(value):
                self.learn(value, KEYWORD_RULE)
        for rule, value in scanner_findings(text):
            self.learn(value, rule)
        for ledger in self.ledgers:
            for value in hashed_values(text, ledger):
                self.learn(value, TRIAL_SECRET_RULE)
        for rule, value in find_values(text):  # detectors.py: keys, formats, seams
            for form in escaped_forms(value):
                self.learn(form, rule)
        if "\\/" in text:  # https:\/\/user:pass@host in a JSON string read as text
            for _start, _end, password in url_credentials(text.replace("\\/", "/")):
                for form in escaped_forms(password):
                    self.learn(form, URL_RULE)

    def learn_json(self, doc: object) -> None:
        """Remember the values of hidden names in a parsed JSON document (any depth), and what
        each string in it shows once decoded (a log kept in a JSON string: its escapes read
        as the text they stand for)."""
        for _path, name, value in _named_strings(doc):
            rule = self.name_rule(name)
            if rule is not None and not is_count(name, value):
                self.learn(value, rule)
        for leaf in _strings(doc):
            if json.dumps(leaf, ensure_ascii=False)[1:-1] != leaf:  # the raw text read it
                self.learn_text(leaf)                                # otherwise (escapes)

    # -- rewriting -------------------------------------------------------------------------
    def scrub_text(self, text: str, state: FileState) -> tuple[str, list[Hit]]:
        """``text`` with every rule applied, line by line, and what changed on which line."""
        hits: list[Hit] = []
        out: list[str] = []
        lines = split_lines(text)
        # Blocks of lines first: a block nothing matches in (most of a log) is kept in one
        # pass of each rule; a block with a finding is done again line by line, for the line
        # numbers. No rule's match crosses a line end, so the block finds what the lines do.
        for first in range(0, len(lines), BLOCK_LINES):
            block = lines[first:first + BLOCK_LINES]
            key_end = state.key_end
            whole = "".join(block)
            new, block_hits = self.scrub_line(whole, state, first + 1)
            if not block_hits or len(block) == 1:  # one line (a 10 MB one): done already
                out.append(new)
                hits.extend(block_hits)
                continue
            state.key_end = key_end
            for number, line in enumerate(block, start=first + 1):
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
        line = _private_keys(line, state, number, hits)
        line = self._assignments(line, number, hits)
        line = self._literals(line, number, hits)
        line = _url_sub(line, number, hits)
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
        for regex in self._pair_regexes():
            def repl(m: re.Match[str]) -> str:
                rule = self.name_rule(m.group("name"))
                value = _unquote(m.group("value"))
                if rule is None or _kept(value) or is_count(m.group("name"), value):
                    return m.group(0)
                placeholder = _placeholder(rule)
                quoted = _requote(m.group("value"), placeholder)
                hits.append(Hit(rule, number, value, placeholder))
                start, end = m.span("value")
                whole = m.group(0)
                base = m.start(0)
                return whole[: start - base] + quoted + whole[end - base:]
            parts: list[str] = []
            pos = 0
            for m in _pair_matches(regex, line):
                parts += [line[pos:m.start()], repl(m)]
                pos = m.end()
            line = "".join(parts) + line[pos:] if parts else line
        return line

    def _literals(self, line: str, number: int, hits: list[Hit]) -> str:
        # One alternation, longest first, so a value that contains another is replaced whole;
        # never inside a placeholder already written (a secret "redact" must not eat
        # "<redacted:secret>").
        regex = self._literal_regex()
        if regex is None:
            return line

        def repl(m: re.Match[str]) -> str:
            rule = self.values[m.group(0)]
            placeholder = _placeholder(rule)
            hits.append(Hit(rule, number, m.group(0), placeholder))
            return placeholder
        return outside_placeholders(line, lambda part: regex.sub(repl, part))

    def _literal_regex(self) -> re.Pattern[str] | None:
        count, regex = self._literal_re
        if count != len(self.values):  # values are only ever added
            words = sorted(self.values, key=len, reverse=True)
            regex = re.compile("|".join(re.escape(w) for w in words)) if words else None
            self._literal_re = (len(self.values), regex)
        return regex

    def scrub_json(self, doc: object, state: FileState) -> tuple[Any, list[tuple[str, Hit]]]:
        """A copy of ``doc`` with hidden names' values replaced and every string leaf (keys
        included) scrubbed as text; each hit with the JSON path it was found at."""
        hits: list[tuple[str, Hit]] = []

        def walk(node: object, path: str, hidden_by: str | None) -> object:
            if isinstance(node, dict):
                out: dict[str, Any] = {}
                named = _k8s_name(node)  # {"name": "DB_PASSWORD", "value": "..."}
                for key, value in node.items():
                    sub = f"{path}.{key}" if path else str(key)
                    rule = self.name_rule(key) if isinstance(key, str) else None
                    if rule is not None and is_count(key, str(value)):
                        rule = None  # num_tokens: 131072 is evidence
                    # an env snapshot keeps a variable as {"value": ..., "state": ...}
                    inner = (hidden_by or named) if key == "value" else rule
                    # a variable's name is kept as it is (a value may be a part of it: SECRET)
                    new_key = key if rule is not None or not isinstance(key, str) else \
                        self.distinct(key, self._leaf(key, sub, state, hits))
                    new_value = walk(value, sub, inner)
                    # (a string's walk is a string)
                    if key in NAMED_KEYS and isinstance(value, str) and isinstance(new_value, str) \
                            and new_value != value:
                        new_value = self.distinct(value, new_value)
                    out[new_key] = new_value
                return out
            if isinstance(node, list):
                return [walk(v, f"{path}[{i}]", None) for i, v in enumerate(node)]
            if hidden_by is not None and isinstance(node, (int, float)) \
                    and not isinstance(node, bool):  # "password": 12345678
                hits.append((path, Hit(hidden_by, 0, str(node), SECRET_PLACEHOLDER, path)))
                return _placeholder(hidden_by)
            if isinstance(node, str):
                if hidden_by is not None and not _kept(node):
                    placeholder = _placeholder(hidden_by)
                    hits.append((path, Hit(hidden_by, 0, node, placeholder, path)))
                    return placeholder
                return self._leaf(node, path, state, hits)
            return node

        return walk(doc, "", None), hits

    def distinct(self, original: str, scrubbed: str) -> str:
        """A name the recipe chose (a cell, a ticket, a JSON key) that had to be scrubbed, kept
        apart from every other: ``#N`` after it, N the same for one original throughout the
        bundle, so two cells never become one series or one key."""
        if scrubbed == original:
            return original
        number = self.aliases.setdefault(original, len(self.aliases) + 1)
        return f"{scrubbed}#{number}"

    def _leaf(self, text: str, path: str, state: FileState, hits: list[tuple[str, Hit]]) -> str:
        new, line_hits = self.scrub_line(text, state, 0)
        state.key_end = None  # a key block never runs on from one JSON string into the next
        hits.extend((path, Hit(h.rule, 0, h.before, h.after, path)) for h in line_hits)
        return new


@dataclass
class FileState:
    """Per-file numbering of placeholders: the same path is the same ``<PATH:N>`` in a file."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    key_end: str | None = None  # inside a private key block: the line that ends it

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


@functools.lru_cache(maxsize=8192)  # a log names the same few variables a million times
def _name_rule(name: str, globs: tuple[str, ...]) -> str | None:
    # SecretAccessKey too, but only a name: a key like env.HF_TOKEN.hf_x holds a value
    if is_secret_name(name) or (_NAME_RE.fullmatch(name) and key_strength(name) == 2):
        return SECRET_RULE
    if any(fnmatch.fnmatchcase(name, g) for g in globs):
        return ENV_KEYS_RULE
    return None


def _pair_matches(regex: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """The matches of a pair rule: NAME=value and "NAME": for secret names are tried only
    where such a name is (detectors.finditer_near); the YAML rule (anchored at line starts)
    and the rules for every name (scrub_env_keys) walk the text."""
    if regex is _SECRET_PAIR_RES[0] or regex is _SECRET_PAIR_RES[1]:
        return finditer_near(regex, text, _CORE_WORDS, "[A-Za-z0-9_]")
    return list(regex.finditer(text))


def _k8s_name(node: dict[Any, Any]) -> str | None:
    """SECRET_RULE for a ``{"name": NAME, "value": v}`` entry whose NAME names a secret."""
    name = node.get("name")
    if isinstance(name, str) and "value" in node and key_strength(name) == 2:
        return SECRET_RULE
    return None


def _named_strings(doc: object) -> Iterable[tuple[str, str, str]]:
    """(path, name, value) for every string under a name: ``{"NAME": "v"}`` and the env
    snapshot's ``{"NAME": {"value": "v"}}``."""
    stack: list[tuple[str, object]] = [("", doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                sub = f"{path}.{key}"
                if isinstance(value, str) and isinstance(key, str):
                    yield sub, key, value
                    if key == "value" and _k8s_name(node):
                        yield sub, node["name"], value
                elif isinstance(value, dict) and isinstance(value.get("value"), str) \
                        and isinstance(key, str):
                    yield sub, key, value["value"]
                stack.append((sub, value))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(node))


# -- the detectors that do not need a name next to the value ------------------------------
def url_credentials(text: str) -> list[tuple[int, int, str]]:
    """(start, end, password) of each ``user:password`` of a URL in ``text``, and (-1, -1,
    password) for each shorter reading of an ambiguous one (learned, not replaced in place).

    A password may hold ``@`` and ``/`` (``https://bob:p@ss/w0rd!@host/``): it ends at the
    last ``@`` that a host name follows (and no ``@`` after it), so when in doubt
    more is hidden, never less. ``host:8080/a@b`` is a port, not a password."""
    out: list[tuple[int, int, str]] = []
    for m in _URL_START_RE.finditer(text):
        rest = m.group("rest")
        if "@" not in rest:
            continue
        authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
        if "@" not in authority and ascii_digits(authority):
            continue  # scheme://host:port/...@...: an @ in the path
        ats = [i for i in range(len(rest) - 1, 0, -1)
               if rest[i] == "@" and _URL_HOST_RE.match(rest, i + 1)]
        if not ats:
            continue
        start = m.start("user")
        out.append((start, m.start("rest") + ats[0], rest[:ats[0]]))
        # where the password ends is a guess: each shorter reading is hidden elsewhere too
        out.extend((-1, -1, rest[:i]) for i in ats[1:])
    return out


def _url_sub(line: str, number: int, hits: list[Hit]) -> str:
    found = [f for f in url_credentials(line) if f[0] >= 0]
    for start, end, _password in reversed(found):
        hits.append(Hit(URL_RULE, number, line[start:end], SECRET_PLACEHOLDER))
        line = line[:start] + SECRET_PLACEHOLDER + line[end:]
    hits[len(hits) - len(found):] = reversed(hits[len(hits) - len(found):])  # in line order
    return line


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text`` (0 for an empty one)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def looks_random(value: str) -> bool:
    """The secret_keyword test: long enough, a letter in it (a count is no secret), and
    random-looking; never a placeholder or a ``$VARIABLE``."""
    return (len(value) >= KEYWORD_MIN_CHARS and any(c.isalpha() for c in value)
            and not _kept(value) and _PLACEHOLDER_RE.search(value) is None
            and shannon_entropy(value) >= KEYWORD_MIN_ENTROPY)


_BOUNDARY_RE = re.compile(r"(?<![A-Za-z0-9])|(?![A-Za-z0-9])")


def hashed_values(text: str, ledger: SecretHashes) -> set[str]:
    """The substrings of ``text`` whose keyed hash ``ledger`` holds: every piece of one of the
    recorded lengths that starts and ends at a word boundary (a letter or digit on one side
    only), within one line, not starting or ending with a blank."""
    lengths = sorted(ledger.lengths)
    if not lengths or not text:
        return set()
    # each distinct blank-separated word once: a log repeats its words, and a value never
    # starts or ends with a blank (one holding a blank inside is hidden next to its name only)
    found: set[str] = set()
    for word in set(text.split()):
        if len(word) >= lengths[0]:
            found |= _hashed_in(word, ledger, lengths)
    return found


def _hashed_in(text: str, ledger: SecretHashes, lengths: list[int]) -> set[str]:
    starts = [m.start() for m in _BOUNDARY_RE.finditer(text)]
    marks = bytearray(len(text) + 1)
    for i in starts:
        marks[i] = 1
    found: set[str] = set()
    entries, salt = ledger.entries, ledger.salt
    n = len(text)
    for start in starts:
        if start >= n or text[start].isspace():
            continue
        for length in lengths:
            end = start + length
            if end > n:
                break
            if not marks[end] or text[end - 1].isspace():
                continue
            piece = text[start:end]
            if "\n" in piece:
                break  # longer pieces cross the line end too
            if secret_hash(salt, piece) in entries:
                found.add(piece)
    return found


def _private_keys(line: str, state: FileState, number: int, hits: list[Hit]) -> str:
    """A private key's body (PEM or OpenSSH armour, a PuTTY key file) replaced, its armour
    lines kept; a block may span lines (``state`` carries it) or sit in one JSON string."""
    if state.key_end is None and "PRIVATE KEY" not in line and "PuTTY-User-Key-File" not in line:
        return line
    out: list[str] = []
    pos = 0
    while pos <= len(line):
        if state.key_end is not None:
            end = line.find(state.key_end, pos)
            body = line[pos:] if end < 0 else line[pos:end]
            stripped = body.rstrip("\r\n")
            if stripped.strip():
                body = SECRET_PLACEHOLDER + body[len(stripped):] if end < 0 else SECRET_PLACEHOLDER
            out.append(body)
            if end < 0:
                return "".join(out)
            state.key_end = None
            pos = end
            continue
        m = _PEM_BEGIN_RE.search(line, pos) or _PUTTY_RE.search(line, pos)
        if m is None:
            out.append(line[pos:])
            break
        out.append(line[pos:m.end()])
        label = m.groupdict().get("label")
        state.key_end = f"-----END {label}-----" if label else _PUTTY_END
        hits.append(Hit(PRIVATE_KEY_RULE, number, m.group(0), SECRET_PLACEHOLDER))
        pos = m.end()
    return "".join(out)


def _strings(doc: object) -> Iterable[str]:
    """Every string of a JSON document: keys and values, any depth."""
    stack: list[object] = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            stack.extend(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
