"""A bundle's ``MANIFEST.json`` as a typed value: one serializer, one reader.

``bundle`` (``archive.build_bundle``) builds a :class:`BundleManifest` from what each file
became (:class:`BundledFile`, or :class:`SkippedFile` with why it is left out) and writes
:meth:`BundleManifest.to_bytes` as the archive's last member, the JSON the manifest has always
held, key order and encoding included; ``bundle --json`` prints the same object, and the CLI's
and the TUI's one-line summary read its :class:`ManifestTotals`. :func:`read_manifest` reads it
back out of an archive (bounded, every field's type checked; a damaged one is a located
UsageError naming the archive, the member and the field path, exit 2).
"""

from __future__ import annotations

import json
import os
import tarfile
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import (
    INPUT_LIMITS,
    FieldReader,
    Json,
    decode_utf8,
    describe_size,
    open_input,
    parse_json_text,
)

MANIFEST_NAME = "MANIFEST.json"
MANIFEST_KIND = "aorta-tui/bundle"
SCHEMA_VERSION = 1
WHAT = "bundle manifest"
HINT = "pass a bundle written by `aorta-tui bundle` (a .tar.gz holding <name>/MANIFEST.json)"


@dataclass(frozen=True)
class RuleCount:
    """How many values one redaction rule replaced in a file."""

    rule: str
    count: int

    def to_json(self) -> dict[str, Json]:
        return {"rule": self.rule, "count": self.count}


@dataclass(frozen=True)
class BundledFile:
    """A file in the archive: what was written, what it was read as, what was redacted."""

    path: str  # in the archive, under its root (its name redacted when ``renamed``)
    size: int
    sha256: str  # of the bytes archived
    source_size: int
    source_sha256: str  # of the bytes read
    identical: bool  # the archived bytes are the bytes read
    binary: bool  # a NUL byte in it: scanned as bytes
    compressed: str | None  # gzip | bz2 | xz: scanned inside, written back compressed
    renamed: bool
    redacted: bool
    redactions: tuple[RuleCount, ...]  # by rule name
    truncated: dict[str, int] | None  # --max-log-bytes' cut (archive.cut_log), None: whole
    note: str | None = None  # said of a binary file (archive.BINARY_NOTE); None: not written

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {
            "path": self.path, "size": self.size, "sha256": self.sha256,
            "source_size": self.source_size, "source_sha256": self.source_sha256,
            "identical": self.identical, "binary": self.binary, "compressed": self.compressed,
            "renamed": self.renamed, "redacted": self.redacted,
            "redactions": [r.to_json() for r in self.redactions],
            "truncated": None if self.truncated is None else dict(self.truncated),
        }
        if self.note is not None:
            out["note"] = self.note
        return out

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key


@dataclass(frozen=True)
class SkippedFile:
    """A file left out of the archive, and why (too large, unreadable, never bundled)."""

    path: str
    skipped: str | None
    renamed: bool

    def to_json(self) -> dict[str, Json]:
        return {"path": self.path, "skipped": self.skipped, "renamed": self.renamed}


ManifestFile = BundledFile | SkippedFile


@dataclass(frozen=True)
class InputRedaction:
    """The rules one input was redacted by (its recipe's merged with --redaction-from)."""

    scrub_env_keys: tuple[str, ...]
    scrub_paths: bool
    scrub_ip_addresses: bool
    hostnames: int  # how many host names were scrubbed, never which

    def to_json(self) -> dict[str, Json]:
        return {"scrub_env_keys": list(self.scrub_env_keys), "scrub_paths": self.scrub_paths,
                "scrub_ip_addresses": self.scrub_ip_addresses, "hostnames": self.hostnames}


@dataclass(frozen=True)
class ManifestInput:
    """One path given to ``bundle``, under the name it has in the archive."""

    name: str
    kind: str  # run | policy-sweep | queue-result
    run_id: str | None
    recipe_hash: str | None
    running: bool  # still run by someone when bundled (it may hold a trial cut short)
    redaction: InputRedaction

    def to_json(self) -> dict[str, Json]:
        return {"name": self.name, "kind": self.kind, "run_id": self.run_id,
                "recipe_hash": self.recipe_hash, "running": self.running,
                "redaction": self.redaction.to_json()}


@dataclass(frozen=True)
class ManifestRules:
    """The rules every input was scanned with."""

    always: tuple[str, ...]
    scanner: tuple[str, ...]  # detect-secrets' plugins used
    hostnames: bool  # --hostnames
    max_log_bytes: int | None

    def to_json(self) -> dict[str, Json]:
        return {"always": list(self.always), "scanner": list(self.scanner),
                "hostnames": self.hostnames, "max_log_bytes": self.max_log_bytes}


@dataclass(frozen=True)
class ManifestTotals:
    """The counts the bundle's summary line says (of :attr:`BundleManifest.files`)."""

    files: int
    skipped: int
    redacted_files: int
    binary_files: int
    compressed_files: int
    truncated_files: int
    redactions: dict[str, int]  # rule: values replaced, by rule name

    @classmethod
    def of(cls, files: Sequence[ManifestFile]) -> ManifestTotals:
        written = [f for f in files if isinstance(f, BundledFile)]
        counts: Counter[str] = Counter()
        for f in written:
            for r in f.redactions:
                counts[r.rule] += r.count
        return cls(files=len(written), skipped=len(files) - len(written),
                   redacted_files=sum(1 for f in written if f.redacted),
                   binary_files=sum(1 for f in written if f.binary),
                   compressed_files=sum(1 for f in written if f.compressed),
                   truncated_files=sum(1 for f in written if f.truncated),
                   redactions=dict(sorted(counts.items())))

    def to_json(self) -> dict[str, Json]:
        return {"files": self.files, "skipped": self.skipped,
                "redacted_files": self.redacted_files, "binary_files": self.binary_files,
                "compressed_files": self.compressed_files,
                "truncated_files": self.truncated_files, "redactions": dict(self.redactions)}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key


@dataclass(frozen=True)
class BundleManifest:
    """``<name>/MANIFEST.json``: what a bundle holds and how it was redacted (docs/bundle.md)."""

    tool_version: str
    created: str  # ISO 8601, UTC, to the second
    inputs: tuple[ManifestInput, ...]
    rules: ManifestRules
    totals: ManifestTotals
    files: tuple[ManifestFile, ...]
    tool: str = "aorta-tui"
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Json]:
        """The object MANIFEST.json holds, keys in the order it has always had them."""
        return {"schema_version": self.schema_version, "kind": MANIFEST_KIND, "tool": self.tool,
                "tool_version": self.tool_version, "created": self.created,
                "inputs": [i.to_json() for i in self.inputs], "rules": self.rules.to_json(),
                "totals": self.totals.to_json(), "files": [f.to_json() for f in self.files]}

    def to_bytes(self) -> bytes:
        """MANIFEST.json's bytes: indented, non-ASCII kept, a final newline (as always)."""
        return (json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n").encode()

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = MANIFEST_NAME) -> BundleManifest:
        """Read a parsed MANIFEST.json; a damaged one is a located UsageError (exit 2)."""
        return _read_manifest(FieldReader(where, WHAT), data)


# -- reading it out of an archive ----------------------------------------------------------


def read_manifest(archive: str | os.PathLike[str]) -> BundleManifest:
    """The manifest of a bundle archive: a regular file (never a FIFO or a device), its
    ``<root>/MANIFEST.json`` at most ``INPUT_LIMITS[WHAT]`` bytes, every field checked."""
    where = os.fspath(archive)
    fh = open_input(archive, what="bundle", hint=HINT)
    assert fh is not None
    with fh:
        try:
            with tarfile.open(fileobj=fh, mode="r:*") as tar:
                name, raw = _manifest_member(tar, where)
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            raise UsageError(f"{where}: not a readable bundle archive: {exc}", hint=HINT) from None
    located = f"{where}:{name}"
    data = parse_json_text(decode_utf8(raw, where=located, what=WHAT), where=located, what=WHAT,
                           hint=HINT)
    return BundleManifest.from_dict(data, where=located)


def _manifest_member(tar: tarfile.TarFile, where: str) -> tuple[str, bytes]:
    """The archive's ``<root>/MANIFEST.json`` (an input's own MANIFEST.json is deeper)."""
    limit = INPUT_LIMITS[WHAT]
    for member in tar:
        parts = member.name.split("/")
        if len(parts) != 2 or parts[1] != MANIFEST_NAME or not member.isfile():
            continue
        if member.size > limit:
            raise UsageError(f"{where}:{member.name}: the {WHAT} is {describe_size(member.size)}, "
                             f"over the {describe_size(limit)} limit", hint=HINT)
        body: IO[bytes] | None = tar.extractfile(member)
        assert body is not None  # a regular file's member
        return member.name, body.read(limit + 1)
    raise UsageError(f"{where}: no <name>/{MANIFEST_NAME} in it: not a bundle", hint=HINT)


# -- the reader ----------------------------------------------------------------------------


def _read_manifest(f: FieldReader, data: object) -> BundleManifest:
    d = f.obj(data, "(top level)")
    if d.get("kind") != MANIFEST_KIND:
        raise UsageError(f"{f.where} is not a bundle manifest (kind {d.get('kind')!r:.40})",
                         hint=HINT)
    rules = f.obj_at(d, "rules", "", required=True)
    return BundleManifest(
        schema_version=f.integer(d, "schema_version", "", SCHEMA_VERSION),
        tool=f.text(d, "tool", "", "aorta-tui"), tool_version=f.text(d, "tool_version", ""),
        created=f.text(d, "created", ""),
        inputs=tuple(_read_input(f, v, f"inputs[{i}]")
                     for i, v in enumerate(f.array_at(d, "inputs", ""))),
        rules=ManifestRules(
            always=f.strings_at(rules, "always", "rules"),
            scanner=f.strings_at(rules, "scanner", "rules"),
            hostnames=f.boolean(rules, "hostnames", "rules"),
            max_log_bytes=f.opt_integer(rules, "max_log_bytes", "rules")),
        totals=_read_totals(f, f.obj_at(d, "totals", "", required=True)),
        files=tuple(_read_file(f, v, f"files[{i}]")
                    for i, v in enumerate(f.array_at(d, "files", ""))))


def _read_input(f: FieldReader, value: object, path: str) -> ManifestInput:
    d = f.obj(value, path)
    r = f.obj_at(d, "redaction", path, required=True)
    rp = f.join(path, "redaction")
    return ManifestInput(
        name=f.text(d, "name", path, required=True), kind=f.text(d, "kind", path),
        run_id=f.opt_text(d, "run_id", path), recipe_hash=f.opt_text(d, "recipe_hash", path),
        running=f.boolean(d, "running", path),
        redaction=InputRedaction(
            scrub_env_keys=f.strings_at(r, "scrub_env_keys", rp),
            scrub_paths=f.boolean(r, "scrub_paths", rp),
            scrub_ip_addresses=f.boolean(r, "scrub_ip_addresses", rp),
            hostnames=f.integer(r, "hostnames", rp)))


def _read_totals(f: FieldReader, d: dict[str, Any]) -> ManifestTotals:
    p = "totals"
    return ManifestTotals(
        files=f.integer(d, "files", p), skipped=f.integer(d, "skipped", p),
        redacted_files=f.integer(d, "redacted_files", p),
        binary_files=f.integer(d, "binary_files", p),
        compressed_files=f.integer(d, "compressed_files", p),
        truncated_files=f.integer(d, "truncated_files", p),
        redactions=_counts(f, f.obj_at(d, "redactions", p), "totals.redactions"))


def _counts(f: FieldReader, d: dict[str, Any], path: str) -> dict[str, int]:
    return {str(k): int(f.check(v, "integer", f"{path}.{k}")) for k, v in d.items()}


def _read_file(f: FieldReader, value: object, path: str) -> ManifestFile:
    d = f.obj(value, path)
    name = f.text(d, "path", path, required=True)
    if "sha256" not in d:  # written without its bytes: skipped, and why
        return SkippedFile(path=name, skipped=f.opt_text(d, "skipped", path),
                           renamed=f.boolean(d, "renamed", path))
    cut = f.obj_at(d, "truncated", path) if d.get("truncated") is not None else None
    return BundledFile(
        path=name, size=f.integer(d, "size", path, required=True),
        sha256=f.text(d, "sha256", path),
        source_size=f.integer(d, "source_size", path),
        source_sha256=f.text(d, "source_sha256", path),
        identical=f.boolean(d, "identical", path), binary=f.boolean(d, "binary", path),
        compressed=f.opt_text(d, "compressed", path), renamed=f.boolean(d, "renamed", path),
        redacted=f.boolean(d, "redacted", path),
        redactions=tuple(_read_count(f, v, f"{f.join(path, 'redactions')}[{i}]")
                         for i, v in enumerate(f.array_at(d, "redactions", path))),
        truncated=None if cut is None else _counts(f, cut, f.join(path, "truncated")),
        note=f.text(d, "note", path) if "note" in d else None)


def _read_count(f: FieldReader, value: object, path: str) -> RuleCount:
    d = f.obj(value, path)
    return RuleCount(rule=f.text(d, "rule", path, required=True),
                     count=f.integer(d, "count", path, required=True))
