"""The token formats of a maintained scanner: detect-secrets' regex plugins, imported only
when a bundle is made (never by ``--help`` or the TUI's first frame), each plugin's class the
rule's name (``detect_secrets.GitHubTokenDetector``). The keyword plugins run only near their
words, so a log is not walked once per plugin at every position."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import cast

from aorta_tui.core.errors import EnvironmentProblem

SCANNER_PREFIX = "detect_secrets."  # + the plugin's class name: detect_secrets.GitHubTokenDetector


# detect-secrets plugins that are not used, and why (docs/bundle.md)
SCANNER_EXCLUDED = {
    "Base64HighEntropyString": "flags every hash and id a run records (sha256, recipe hashes); "
                               "entropy is judged next to a secret's name (secret_keyword)",
    "HexHighEntropyString": "as Base64HighEntropyString",
    "KeywordDetector": "names are read by the one rule of core/secrets.py (secret_env, "
                       "secret_keyword)",
    "IPPublicDetector": "addresses are scrubbed on request (scrub_ip_addresses)",
    "PrivateKeyDetector": "it finds the first line; the private_key rule hides the whole block",
    "BasicAuthDetector": "url_credentials also finds passwords holding '@' or '/'",
}
# a plugin whose pattern also matches words: Artifactory's AKC/AP prefixes took the cell names
# APEXbaseline and AKCmitigations (real Artifactory keys are 64 characters or more)
SCANNER_MIN_CHARS = {SCANNER_PREFIX + "ArtifactoryDetector": 40}
# words (lower case) without one of which a plugin's pattern cannot match: its pass is
# skipped. The keyword plugins try an empty prefix at every position (about 1 s per 10 MB each)
_KEYWORDS = ("key", "pw", "pass", "token", "secret")
GATE_REACH = 256
SCANNER_GATES = {"IbmCosHmacDetector": _KEYWORDS, "IbmCloudIamDetector": _KEYWORDS,
                 "CloudantDetector": (*_KEYWORDS, "cloudant"),
                 "SoftlayerDetector": (*_KEYWORDS, "softlayer"),
                 "ArtifactoryDetector": ("akc", "ap"), "MailchimpDetector": ("-us",),
                 "AWSKeyDetector": ("aws", "akia", "asia", "abia", "acca", "a3t"),
                 "SlackDetector": ("xox", "hooks.slack.com"), "TelegramBotTokenDetector": (":",)}
def _near_words(text: str, lower: str, words: tuple[str, ...]) -> str:
    """The parts of ``text`` within :data:`GATE_REACH` characters of one of ``words``
    (``lower`` is ``text`` lower-cased), joined by newlines: a keyword plugin's match holds
    its word and is shorter than that, so it lies inside one part. str.find runs in C, and
    each step covers at least GATE_REACH characters."""
    spans: list[tuple[int, int]] = []
    n = len(lower)
    for word in words:
        pos = lower.find(word)
        while pos >= 0:
            # every occurrence before pos + GATE_REACH lies inside this part
            spans.append((max(0, pos - GATE_REACH), min(n, pos + 2 * GATE_REACH)))
            pos = lower.find(word, pos + GATE_REACH)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return "\n".join(text[a:b] for a, b in merged)


SCANNER_HINT = "pip install 'detect-secrets>=1.5,<2' (a dependency of aorta-tui: reinstall it)"


@functools.lru_cache(maxsize=1)
def scanner_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(rule, regex) of every regex plugin of detect-secrets but :data:`SCANNER_EXCLUDED`.
    Imported here, when a bundle is made: never by ``--help`` or the TUI's first frame."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
    except ImportError:
        raise EnvironmentProblem("bundle needs the detect-secrets scanner, which is not "
                                 "installed", hint=SCANNER_HINT) from None
    out: list[tuple[str, re.Pattern[str]]] = []
    # the library's return type names an unbound type variable; its values are plugin classes
    mapping: Mapping[str, type[BasePlugin]] = get_mapping_from_secret_type_to_class()
    classes = sorted(mapping.values(), key=lambda c: c.__name__)
    for cls in classes:
        if cls.__name__ in SCANNER_EXCLUDED or not issubclass(cls, RegexBasedDetector):
            continue
        # each plugin sets denylist as a class attribute (a tuple of compiled patterns); the
        # base class declares it an abstract property, which is what reading it on a class sees
        denylist = cast("Iterable[re.Pattern[str]]", cls.denylist)
        out.extend((SCANNER_PREFIX + cls.__name__, rx) for rx in denylist)
    return tuple(out)


def scanner_findings(text: str) -> list[tuple[str, str]]:
    """(rule, value) of every token a scanner plugin recognises in ``text``: the longest
    group of the match of 8 characters or more (a keyword plugin captures the value), else
    the whole match without the blanks, quotes, ``=`` and ``:`` around it."""
    out: list[tuple[str, str]] = []
    gated: dict[tuple[str, ...], str] = {}
    lower = text.lower()
    for rule, regex in scanner_patterns():
        gate = SCANNER_GATES.get(rule.removeprefix(SCANNER_PREFIX))
        where = text
        # only the text around one of the words; lower() that changes the length (a dotted
        # capital I) would misplace it: the whole text then
        if gate is not None and len(lower) == len(text):
            if gate not in gated:
                gated[gate] = _near_words(text, lower, gate)
            where = gated[gate]
        for m in regex.finditer(where):
            groups = [g for g in m.groups() if isinstance(g, str) and len(g) >= 8]
            value = max(groups, key=len) if groups else m.group(0).strip(" \t\r\n\"'=:")
            if value and len(value) >= SCANNER_MIN_CHARS.get(rule, 0):
                out.append((rule, value))
    return out
