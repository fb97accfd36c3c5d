"""What one file's bytes become: compressed streams and containers opened
(:mod:`aorta_tui.bundle.decoders`), JSON redacted by structure, text by the rules of
:mod:`aorta_tui.bundle.redact`. Pure functions over bytes: no file is opened here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from aorta_tui.bundle.decoders import (
    MAX_NESTING,
    Unscannable,
    open_layer,
    zip_bytes,
    zip_members,
)
from aorta_tui.bundle.detectors import ENCODED_RULE, base64_blobs
from aorta_tui.bundle.redact import FileState, Hit, Scrubber, split_lines

__all__ = ["Unscannable", "learn_data", "scrub_data", "redact_file"]

_TEXT_RUN_RE = re.compile(rb"[\t\x1b\x20-\x7e]{4,}")  # ESC: coloured logs
# The most a compressed file may expand to while it is scanned (a gzip bomb is left out), and
# how deep compressed streams may nest (a .gz of a .gz ...).
def learn_data(data: bytes, name: str, scrub: Scrubber, depth: int = 0) -> None:
    """Learn every secret value ``data`` shows, through every layer it is wrapped in."""
    layer = open_layer(data, depth)
    if layer is not None and layer.inner is not data:  # a numeric array: read below
        learn_data(layer.inner, inner_name(name, layer.kind), scrub, depth + 1)
        return
    zipped = zip_members(data)
    if zipped is not None:
        prefix, members = zipped
        learn_data(prefix, name, scrub, depth + 1)
        for info, body in members:
            scrub.learn_text(info.filename)
            learn_data(body, info.filename, scrub, depth + 1)
        return
    text = data.decode("utf-8", "surrogateescape")
    # a binary file (a NUL byte: a tensor, a core file) is learned from its text runs only,
    # as `strings` reads it: its secrets are ASCII runs, and random bytes would cost the
    # scanner seconds per MB for nothing
    readable = text if b"\x00" not in data else "\n".join(
        run.decode("ascii") for run in _TEXT_RUN_RE.findall(data))
    scrub.learn_text(readable)
    learn_base64(readable, scrub, depth)
    suffix = Path(name).suffix
    if suffix == ".json":
        doc = maybe_json(text)
        if doc is not None:
            scrub.learn_json(doc)
    elif suffix == ".jsonl":
        for line in split_lines(text):
            doc = maybe_json(line)
            if doc is not None:
                scrub.learn_json(doc)


def learn_base64(text: str, scrub: Scrubber, depth: int) -> None:
    """A base64 blob (an environment dump, a docker config, a kube secret) is decoded and
    scanned; when what it holds shows a secret, the whole blob is a secret too."""
    if depth >= MAX_NESTING:
        return
    for blob, decoded in base64_blobs(text):
        before = len(scrub.values)
        try:
            learn_data(decoded, "blob", scrub, depth + 1)
        except Unscannable:
            continue
        inner = decoded.decode("utf-8", "surrogateescape")
        found = len(scrub.values) > before or scrub.holds_value(inner)
        if found:
            scrub.learn(blob, ENCODED_RULE)


def inner_name(name: str, kind: str) -> str:
    """``trace.json.gz`` holds ``trace.json``: the inner name picks the JSON or text rules."""
    suffixes = {"gzip": (".gz", ".gzip"), "bz2": (".bz2",), "xz": (".xz",),
                "zlib": (".zz", ".zlib")}.get(kind, ())
    for suffix in suffixes:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def scrub_data(data: bytes, name: str, scrub: Scrubber, depth: int = 0
               ) -> tuple[bytes, list[Hit], str | None]:
    """``data`` with every rule applied, every layer opened and written back when something
    was hidden; the kind of the outermost layer (or None)."""
    layer = open_layer(data, depth)
    if layer is not None:
        if layer.inner is data:
            new, hits = redact_file(data, Path(name).suffix, scrub)
            return new, hits, None
        inner, hits, _ = scrub_data(layer.inner, inner_name(name, layer.kind), scrub, depth + 1)
        return (layer.rewrap(inner) if hits else data), hits, layer.kind
    zipped = zip_members(data)
    if zipped is not None:
        return _scrub_zip(data, *zipped, scrub, depth)
    new, hits = redact_file(data, Path(name).suffix, scrub)
    return new, hits, None


def _scrub_zip(data: bytes, prefix: bytes, members: list[tuple[Any, bytes]], scrub: Scrubber,
               depth: int) -> tuple[bytes, list[Hit], str | None]:
    hits: list[Hit] = []
    new_prefix, prefix_hits, _ = scrub_data(prefix, "prefix", scrub, depth + 1)
    hits.extend(prefix_hits)
    out: list[tuple[Any, str, bytes]] = []
    for info, body in members:
        new_body, member_hits, _ = scrub_data(body, info.filename, scrub, depth + 1)
        new_name = scrub.scrub_name(info.filename)
        hits.extend(member_hits)
        if new_name != info.filename:
            hits.append(Hit("secret_value", 0, info.filename, new_name, "zip member name"))
        out.append((info, new_name, new_body))
    return (zip_bytes(new_prefix, out) if hits else data), hits, "zip"


def redact_file(data: bytes, suffix: str, scrub: Scrubber) -> tuple[bytes, list[Hit]]:
    """The bytes of a text file with every rule applied (unchanged bytes when nothing
    matched). JSON files are redacted by structure, so every JSON file stays valid."""
    text = data.decode("utf-8", "surrogateescape")
    state = FileState()
    if suffix == ".json":
        doc = maybe_json(text)
        if doc is not None and isinstance(doc, (dict, list)):
            new_doc, json_hits = scrub.scrub_json(doc, state)
            if not json_hits:
                return data, []
            hits = [_located(text, h) for _p, h in json_hits]
            return _dump_like(text, new_doc).encode("utf-8", "surrogateescape"), hits
    if suffix == ".jsonl":
        return _redact_jsonl(text, data, scrub, state)
    new, hits = scrub.scrub_text(text, state)
    if not hits:
        return data, []
    return new.encode("utf-8", "surrogateescape"), hits


def _redact_jsonl(text: str, data: bytes, scrub: Scrubber, state: FileState
                  ) -> tuple[bytes, list[Hit]]:
    out: list[str] = []
    hits: list[Hit] = []
    for number, line in enumerate(split_lines(text), start=1):
        body = line.rstrip("\r\n")
        doc = maybe_json(body)
        if isinstance(doc, (dict, list)):
            new_doc, json_hits = scrub.scrub_json(doc, state)
            if json_hits:
                hits.extend(Hit(h.rule, number, h.before, h.after, h.where) for _p, h in json_hits)
                line = json.dumps(new_doc, ensure_ascii=False) + line[len(body):]
        else:
            line, line_hits = scrub.scrub_line(line, state, number)
            hits.extend(line_hits)
        out.append(line)
    if not hits:
        return data, []
    return "".join(out).encode("utf-8", "surrogateescape"), hits


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKey("a key appears twice")
    return out


def maybe_json(text: str) -> object:
    """The document, or None when ``text`` is no JSON object or array that would survive a
    rewrite (a repeated key would lose a value): such a file is redacted as text."""
    if not text.strip() or text.lstrip()[:1] not in "{[":
        return None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None


def _dump_like(original: str, doc: object) -> str:
    """``doc`` in the layout ``original`` was written in (aorta-tui writes indent 2)."""
    for indent in (2, None, 1, 4):
        if _dump(maybe_json(original), indent) == original:
            return _dump(doc, indent)
    return _dump(doc, 2)


def _dump(doc: object, indent: int | None) -> str:
    return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"


def _located(text: str, hit: Hit) -> Hit:
    """The line of a JSON hit: where its value is first written in the original text."""
    needle = json.dumps(hit.before, ensure_ascii=False)[1:-1]
    at = text.find(needle) if needle else -1
    line = text.count("\n", 0, at) + 1 if at >= 0 else 0
    return Hit(hit.rule, line, hit.before, hit.after, hit.where)

