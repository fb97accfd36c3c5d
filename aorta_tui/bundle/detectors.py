"""Secrets in the forms a GPU engineer's logs and files hold them: a structured layer over
detect-secrets' plugins (:mod:`aorta_tui.bundle.redact`).

- **keys that name a secret**, wherever a key and a value stand together: ``key=value``,
  ``key: value`` (YAML, INI, an HTTP header), ``"key": "value"`` or ``"key": 123`` (JSON),
  ``key := v``, ``'key' => 'v'``, a URL query (``&token=``, ``&sig=``, ``X-Amz-Signature=``),
  a CLI flag (``--aws-secret-access-key V``, ``--password=V``, ``-p V`` after ``-u USER``),
  a Kubernetes ``name``/``value`` pair (JSON or YAML), a netrc ``login u password p``;
  a key names a secret by the one rule of :mod:`aorta_tui.core.secrets` read on its words
  (``SecretAccessKey`` is ``SECRET_ACCESS_KEY``), or by a weaker word (``auth``, ``sig``,
  ``signature``, ``pwd``, ``pass``) when its value also looks random;
- **provider token formats** by prefix (read from the public rule sets of gitleaks and
  trufflehog; the patterns here are this project's): fine-grained GitHub PATs, OpenAI project
  and service keys, Anthropic, Hugging Face, npm, Twilio, Mailgun, NVIDIA NGC, Google OAuth
  and API keys, GitLab, JWTs (the whole token and its signature);
- the text is read with ANSI escape codes removed and lines wrapped at column 80 joined; a
  value found across such a seam is learned as the pieces it is written in.

Pure functions over text: :func:`find_values` says which values are secrets; the scrubber
learns them and hides them wherever they appear.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Iterator

from aorta_tui.core.secrets import is_secret_name

KEYED_RULE = "secret_context"    # a value next to a key that names a secret
FORMAT_RULE = "token_format"     # a provider's token, known by its prefix
ENCODED_RULE = "encoded_secret"  # a base64 blob that holds a secret
WRAP_COLUMN = 80
MIN_PIECE_CHARS = 6  # a piece of a wrapped secret shorter than this is not learned alone
MIN_VALUE_CHARS = 6
RANDOM_MIN_CHARS = 8
RANDOM_MIN_ENTROPY = 3.0
# weaker words: a key holding one names a secret when its value looks random
_WEAK_WORDS = frozenset({"AUTH", "SIG", "SIGNATURE", "PWD", "PASS", "PASSCODE", "APIKEY",
                         "ACCOUNTKEY", "SHAREDACCESSKEY", "PRIVATE", "SESSION"})
# names of counts, not secrets: num_tokens=131072, max_new_tokens: 512
_COUNT_WORDS = frozenset({"NUM", "N", "MAX", "MIN", "TOTAL", "COUNT", "PER", "SEQ", "LEN",
                          "LENGTH", "SIZE", "LIMIT", "NEW", "PROMPT", "INPUT", "OUTPUT", "BATCH",
                          "GENERATED", "CONTEXT", "USED", "AVG", "MEAN"})
_NUMBER_RE = re.compile(r"[-+]?\d[\d_.,]*(?:[eE][-+]?\d+)?")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ANSI_RE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

_VALUE = r"""(?P<q>["'])?(?P<value>(?(q)[^"'\n]+|[^\s"'`,;&<>(){}\[\]|\\]+))"""
# key <sep> value: =, :, :=, =>, with optional quotes around the key (JSON, PHP, Ruby)
_PAIR_RE = re.compile(
    r"""(?<![\w.-])(?P<kq>["'])?"""
    # a key that can name a secret holds one of these (the rest fail inside the engine)
    r"""(?=[\w.-]*?(?i:token|secret|pass|credential|cookie|key|auth|sig|pwd|private|session))"""
    r"""(?P<key>[A-Za-z_][\w.-]{0,80})["']?(?P<sp1>[ \t]*)"""
    r"""(?P<sep>:=|=>|=|:)(?P<sp2>[ \t]*)""" + _VALUE)
# --flag value / --flag=value
_FLAG_RE = re.compile(r"(?<![\w-])--(?P<key>[A-Za-z][\w-]{0,80})(?:=|[ \t]+)" + _VALUE)
# -p value after a user name was given (docker login -u u -p p, mysql -u root -p x)
_SHORT_P_RE = re.compile(r"(?:-u|--username|--user)[ \t]+\S+.*?(?<!\S)-p[ \t]+" + _VALUE)
_K8S_JSON_RE = re.compile(
    r"""["']name["']\s*:\s*["'](?P<key>[\w.-]+)["']\s*,\s*["']value["']\s*:\s*""" + _VALUE)
_K8S_YAML_RE = re.compile(
    r"""name:[ \t]*["']?(?P<key>[\w.-]+)["']?[ \t]*\r?\n[ \t]*(?:-[ \t]+)?value:[ \t]*""" + _VALUE)
_NETRC_RE = re.compile(r"(?:\blogin[ \t]+\S+[ \t]+|^[ \t]*)password[ \t]+(?P<value>\S+)",
                       re.MULTILINE)
_JWT_RE = re.compile(r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.(?P<sig>[\w-]{16,})")

# provider formats: (name, literals one of which a match holds, pattern); the literals let a
# log without them skip the pattern (a regex pass costs a tenth of a second per MB here)
_FORMATS = tuple((name, lits, re.compile(rx)) for name, lits, rx in (
    ("github", ("gh", "github_pat_"),
     r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255})"),
    ("openai", ("sk-",), r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    ("openai_legacy", ("T3BlbkFJ",), r"\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),
    ("anthropic", ("sk-ant-",), r"\bsk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_-]{20,}"),
    ("huggingface", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}"),
    ("twilio", ("SK",), r"\bSK[0-9a-fA-F]{32}\b"),
    ("mailgun", ("key-", "-"),
     r"\bkey-[0-9a-zA-Z]{32}\b|\b[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}\b"),
    ("nvidia_ngc", ("nvapi-",), r"\bnvapi-[A-Za-z0-9_-]{40,}"),
    ("google_oauth", ("ya29.",), r"\bya29\.[0-9A-Za-z_-]{20,}"),
    ("google_api", ("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),
    ("gitlab", ("glpat-", "gldt-", "glptt-", "glrt-"), r"\bgl(?:pat|dt|ptt|rt)-[0-9A-Za-z_-]{20,}"),
    ("aws_key_id", ("AKIA", "ASIA", "ABIA", "ACCA"), r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    ("slack", ("xox",), r"\bxox[abposr]-[0-9A-Za-z-]{10,}"),
    ("stripe", ("_live_", "_test_"), r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}"),
    ("databricks", ("dapi",), r"\bdapi[0-9a-f]{32}\b"),
))
_WRAP_RE = re.compile(rf"(?m)^[^\n]{{{WRAP_COLUMN}}}\r?\n(?=\S)")
_B64_RE = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
_HEX_RE = re.compile(r"[0-9a-fA-F]+")
MAX_B64_CHARS = 4 * 1024 * 1024


def key_words(key: str) -> list[str]:
    """The words of a key: ``SecretAccessKey`` and ``x-amz-signature`` as env names read."""
    spaced = _CAMEL_RE.sub("_", key.lstrip("-"))
    return [w for w in re.split(r"[_.\-]+", spaced.upper()) if w]


@functools.lru_cache(maxsize=8192)  # a log names the same few keys a million times
def key_strength(key: str) -> int:
    """2: the key names a secret; 1: a weaker word (the value must look random); 0: no."""
    words = key_words(key)
    if not words:
        return 0
    if is_secret_name("_".join(words)) or is_secret_name(key.upper()):
        return 2
    return 1 if any(w in _WEAK_WORDS for w in words) else 0


def is_count(key: str, value: str) -> bool:
    """``num_tokens=131072``: a number under a name that counts tokens is no secret."""
    words = set(key_words(key))
    return bool(words & _COUNT_WORDS) and _NUMBER_RE.fullmatch(value) is not None


def is_number(value: str) -> bool:
    return _NUMBER_RE.fullmatch(value) is not None


def shannon(text: str) -> float:
    import math
    from collections import Counter

    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def looks_random(value: str) -> bool:
    return (len(value) >= RANDOM_MIN_CHARS and any(c.isalpha() for c in value)
            and shannon(value) >= RANDOM_MIN_ENTROPY)


def keyed_value_ok(key: str, value: str, spaced: bool) -> bool:
    """Whether ``value`` next to ``key`` is a secret: a strong key's value unless it is a
    reference (``$HF_TOKEN``), a count, or (written with blanks, as prose is) not random;
    a weak key's value only when it looks random."""
    strength = key_strength(key)
    if strength == 0 or len(value) < MIN_VALUE_CHARS or value.startswith(("$", "<", "${")):
        return False
    if is_count(key, value) or value.lower() in ("true", "false", "null", "none", "required"):
        return False
    if strength == 1 or spaced:
        return looks_random(value) or (strength == 2 and is_number(value) and not spaced)
    return True


# -- the text as the eye reads it ----------------------------------------------------------
class Seams:
    """Where text was removed (ANSI codes, the line breaks of a wrap at column 80): maps a
    span of the normalized text back to the pieces it is written in."""

    def __init__(self, norm_starts: list[int], raw_starts: list[int], raw: str) -> None:
        self.norm_starts = norm_starts
        self.raw_starts = raw_starts
        self.raw = raw

    def pieces(self, start: int, end: int) -> list[str]:
        out: list[str] = []
        i = bisect.bisect_right(self.norm_starts, start) - 1
        while i < len(self.norm_starts) and self.norm_starts[i] < end:
            seg_end = self.norm_starts[i + 1] if i + 1 < len(self.norm_starts) else end
            a, b = max(start, self.norm_starts[i]), min(end, seg_end)
            raw_a = self.raw_starts[i] + (a - self.norm_starts[i])
            out.append(self.raw[raw_a: raw_a + (b - a)])
            i += 1
        return [p for p in out if p]

    def continues_line(self, start: int, end: int) -> bool:
        """Whether the span's last piece begins a line of its own (a wrap's continuation)."""
        i = bisect.bisect_right(self.norm_starts, end - 1) - 1
        if i < 0 or self.norm_starts[i] <= start:
            return False
        raw = self.raw_starts[i]
        return raw > 0 and self.raw[raw - 1] in "\r\n"


def normalized(text: str) -> tuple[str, Seams | None]:
    """``text`` without ANSI codes and with lines of exactly 80 visible characters joined to
    the next (a terminal's wrap); None for the seams when nothing was removed."""
    if "\x1b" not in text and not _has_wrap(text):
        return text, None
    norm: list[str] = []
    norm_starts: list[int] = []
    raw_starts: list[int] = []
    length = 0
    pos = 0
    for line in text.splitlines(keepends=True):
        kept = [(m_end, n_start) for m_end, n_start in _visible_spans(line)]
        visible = sum(b - a for a, b in kept)
        body = line.rstrip("\r\n")
        join = visible - (len(line) - len(body)) == WRAP_COLUMN and body != line
        for a, b in kept:
            if join and b > len(body):
                b = len(body)
            if b <= a:
                continue
            norm_starts.append(length)
            raw_starts.append(pos + a)
            norm.append(line[a:b])
            length += b - a
        pos += len(line)
    return "".join(norm), Seams(norm_starts, raw_starts, text)


def _has_wrap(text: str) -> bool:
    return _WRAP_RE.search(text) is not None


def _visible_spans(line: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _ANSI_RE.finditer(line):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(line)))
    return [(a, b) for a, b in spans if b > a]


# -- what is a secret ----------------------------------------------------------------------
def find_values(text: str) -> list[tuple[str, str]]:
    """(rule, value) for every secret :mod:`detectors` sees in ``text``, each value as it is
    written in ``text`` (the pieces of one cut by an ANSI code or a wrap, each learned)."""
    norm, seams = normalized(text)
    out: list[tuple[str, str]] = []
    for rule, start, end in _spans(norm):
        value = norm[start:end]
        pieces = seams.pieces(start, end) if seams is not None else [value]
        if len(pieces) > 1 and _cut_mid_word(norm, end) and seams is not None \
                and seams.continues_line(start, end):
            # the match ran on into the next line's own text (a line of exactly 80 characters
            # before `CORPUS_SC_016=...`): a wrapped token ends where that line's word does,
            # so only the pieces before the line break are the secret; learning the next
            # line's first word would hide it everywhere (a ticket name, a variable's name)
            out.extend((rule, p) for p in pieces[:-1] if len(p) >= MIN_PIECE_CHARS)
            continue
        out.append((rule, value))
        if len(pieces) > 1:
            out.extend((rule, p) for p in pieces if len(p) >= MIN_PIECE_CHARS)
    return out


_WORD_GOES_ON = re.compile(r"[\w=:@/+-]")


def _cut_mid_word(norm: str, end: int) -> bool:
    """Whether the text at ``end`` goes on with the same word (the match stopped inside it)."""
    return end < len(norm) and _WORD_GOES_ON.match(norm, end) is not None


def _spans(text: str) -> Iterator[tuple[str, int, int]]:
    for m in finditer_near(_PAIR_RE, text):
        # blanks around the separator read as prose unless the key or value is quoted
        spaced = bool(m.group("sp1") or m.group("sp2")) and not (m.group("q") or m.group("kq"))
        if keyed_value_ok(m.group("key"), m.group("value"), spaced):
            yield KEYED_RULE, m.start("value"), m.end("value")
    for literal, regex in (("--", _FLAG_RE), ("value", _K8S_JSON_RE), ("value", _K8S_YAML_RE)):
        for m in regex.finditer(text) if literal in text else ():
            if keyed_value_ok(m.group("key"), m.group("value"), False):
                yield KEYED_RULE, m.start("value"), m.end("value")
    for literal, regex in (("-p", _SHORT_P_RE), ("password", _NETRC_RE)):
        for m in regex.finditer(text) if literal in text else ():
            if len(m.group("value")) >= MIN_VALUE_CHARS and not m.group("value").startswith("$"):
                yield KEYED_RULE, m.start("value"), m.end("value")
    for name, literals, regex in _FORMATS:
        if any(lit in text for lit in literals):
            for m in regex.finditer(text):
                yield f"{FORMAT_RULE}.{name}", m.start(), m.end()
    for m in _JWT_RE.finditer(text) if "eyJ" in text else ():
        yield f"{FORMAT_RULE}.jwt", m.start(), m.end()
        yield f"{FORMAT_RULE}.jwt", m.start("sig"), m.end("sig")


def escaped_forms(value: str) -> list[str]:
    """The forms a value takes in JSON and URLs: ``\\/`` for ``/``, percent-encoding."""
    from urllib.parse import quote, unquote

    forms = {value, value.replace("/", "\\/"), quote(value, safe=""), unquote(value)}
    return [f for f in forms if len(f) >= MIN_VALUE_CHARS]


def base64_blobs(text: str) -> Iterator[tuple[str, bytes]]:
    """(blob, decoded bytes) of each base64 run of a plausible size that decodes; hex
    digests (every hash a run records) are not blobs."""
    for m in _B64_RE.finditer(text):
        blob = m.group(0)
        if len(blob) > MAX_B64_CHARS or len(blob) % 4 or _HEX_RE.fullmatch(blob):
            continue
        try:
            yield blob, base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            continue


# -- regexes run only where a secret's word is ----------------------------------------------
# Every key that can name a secret holds one of these (core/secrets.py's words, and the weaker
# ones): a pair rule is tried only at the start of the run of name characters around each.
SECRET_WORDS = ("token", "secret", "pass", "credential", "cookie", "key", "auth", "sig", "pwd",
                "private", "session")
_BACK_REACH = 128


def finditer_near(regex: re.Pattern[str], text: str, words: tuple[str, ...] = SECRET_WORDS,
                  name_chars: str = r"[\w.-]") -> list[re.Match[str]]:
    """``regex.finditer(text)`` for a pattern whose every match starts where a run of
    ``name_chars`` holding one of ``words`` starts (or at a quote just before it): the same
    matches, found by trying the pattern only at those starts (str.find runs in C; the regex
    engine no longer walks every position of a 10 MB line)."""
    lower = text.lower()
    if len(lower) != len(text):  # lower() changed the length: positions would not map
        return list(regex.finditer(text))
    back = _back_regex(name_chars)
    starts: set[int] = set()
    for word in words:
        pos = lower.find(word)
        while pos >= 0:
            run = _run_start(back, text, pos)
            starts.update((run, run - 1) if run > 0 else (run,))
            pos = lower.find(word, pos + 1)
    out: list[re.Match[str]] = []
    end = 0
    for start in sorted(starts):
        if start < end:
            continue
        m = regex.match(text, start)
        if m is not None and m.end() > m.start():
            out.append(m)
            end = m.end()
    return out


@functools.lru_cache(maxsize=8)
def _back_regex(name_chars: str) -> re.Pattern[str]:
    return re.compile(name_chars + r"*\Z")  # \Z: $ would match before a newline too


def _run_start(back: re.Pattern[str], text: str, pos: int) -> int:
    """Where the run of name characters that reaches ``pos`` starts (however long it is)."""
    while True:
        lo = max(0, pos - _BACK_REACH)
        m = back.search(text, lo, pos)
        start = m.start() if m is not None else pos
        if start > lo or lo == 0:
            return start
        pos = lo  # the run goes on past the window: look further back
