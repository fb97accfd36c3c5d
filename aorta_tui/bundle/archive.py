"""Pack run directories (or a policy sweep, or a queue result) into one redacted tar.gz.

:func:`find_inputs` says what each path is (or refuses it with a located error),
:func:`build_bundle` reads every file, applies the rules of :mod:`aorta_tui.bundle.redact`
and streams the archive through :func:`aorta_tui.core.atomic.atomic_open_binary`, so a
failure leaves no archive and never half of one. :func:`review_bundle` runs the same rules
and writes nothing. Layout of the archive (docs/bundle.md)::

    <name>/MANIFEST.json
    <name>/<input>/...      each input under its own name (a run directory's run id)
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import io
import os
import socket
import stat
import tarfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.bundle.content import Unscannable, learn_data, scrub_data
from aorta_tui.bundle.gather import MAX_FILE_BYTES, Gathered, GatherInput, Spool, gather
from aorta_tui.bundle.manifest_doc import (
    MANIFEST_NAME,
    BundledFile,
    BundleManifest,
    InputRedaction,
    ManifestFile,
    ManifestInput,
    ManifestRules,
    ManifestTotals,
    RuleCount,
    SkippedFile,
)
from aorta_tui.bundle.redact import Hit, RedactionConfig, Scrubber
from aorta_tui.core.errors import (
    EnvironmentProblem,
    RecipeError,
    RunDirError,
    UsageError,
)
from aorta_tui.core.inputs import (
    clip_for_message,
    read_input_text,
    read_json_or_none,
)
from aorta_tui.core.secrets import SECRET_HASHES_FILE, is_secret_name, load_secret_hashes

if TYPE_CHECKING:
    from aorta_tui.recipe.checks import Bad, Validator
    from aorta_tui.recipe.loader import Marks
    from aorta_tui.recipe.model import Redaction
    from aorta_tui.store.run_meta import RunMeta

MiB = 1024 * 1024
HASHES_NOTE = ("the keyed hashes of the trials' secrets: read to find those values, never "
               "bundled (a weak password could be guessed from its hash)")
REDACTION_FILE_LIMIT = 1 * MiB
MIN_MAX_LOG_BYTES = 1024
LOG_SUFFIXES = (".log", ".txt")  # a policy trial writes stdout.txt
POLICY_SWEEP_KIND = "aorta-tui/policy-sweep"
QUEUE_KINDS = ("aorta-tui/queue-result", "aorta-tui/queue-sweep")


@dataclass
class BundleInput:
    """One path given to ``bundle``: what it is and under which name it goes in the archive."""

    path: Path
    kind: str  # run | policy-sweep | queue-result
    name: str
    recipe_hash: str | None = None
    run_id: str | None = None
    redaction: RedactionConfig = field(default_factory=RedactionConfig)
    running: str | None = None  # who still runs it (the bundle may hold a trial cut short)


BINARY_NOTE = "binary (a NUL byte): scanned as bytes"


@dataclass
class FileResult:
    """What one file became in the bundle."""

    arcpath: str
    source: Path
    data: bytes | None  # None: skipped
    mode: int = 0o644
    mtime: float = 0.0
    binary: bool = False  # a NUL byte in it: scanned as bytes
    compressed: str | None = None  # gzip | bz2 | xz: scanned inside, written back compressed
    hits: list[Hit] = field(default_factory=list)
    truncated: dict[str, int] | None = None
    skipped: str | None = None
    renamed: bool = False  # the path itself was redacted (the original is not recorded)
    source_size: int = 0
    source_sha256: str = ""

    def manifest_entry(self) -> ManifestFile:
        if self.data is None:
            return SkippedFile(path=self.arcpath, skipped=self.skipped, renamed=self.renamed)
        counts = Counter(h.rule for h in self.hits)
        sha = hashlib.sha256(self.data).hexdigest()
        return BundledFile(
            path=self.arcpath, size=len(self.data), sha256=sha,
            source_size=self.source_size, source_sha256=self.source_sha256,
            identical=sha == self.source_sha256, binary=self.binary,
            compressed=self.compressed, renamed=self.renamed, redacted=bool(self.hits),
            redactions=tuple(RuleCount(r, n) for r, n in sorted(counts.items())),
            truncated=self.truncated, note=BINARY_NOTE if self.binary else None)


# -- inputs --------------------------------------------------------------------------------
def find_inputs(paths: list[Path]) -> list[BundleInput]:
    """What each path is; a path that is none of the things a bundle takes is refused."""
    if not paths:
        raise UsageError("no run directory given", hint="aorta-tui bundle RUN_DIR [-o ticket.tar.gz]")
    out: list[BundleInput] = []
    used: set[str] = set()
    for p in paths:
        inp = identify_input(p)
        base, n = inp.name, 2
        while inp.name in used or inp.name == MANIFEST_NAME:
            inp.name = f"{base}-{n}"
            n += 1
        used.add(inp.name)
        out.append(inp)
    return out


def identify_input(p: Path) -> BundleInput:
    hint = ("pass a run directory (<output>/<ticket>/<run-id>, the one holding journal.jsonl), "
            "a policy sweep directory (holding sweep.json) or a queue result file (queue run -o)")
    try:
        st = p.stat()
    except FileNotFoundError:
        raise RunDirError(f"{p}: no such file or directory", hint=hint) from None
    except OSError as exc:
        raise RunDirError(f"{p}: cannot read it: {exc.strerror or exc}", hint=hint) from None
    name = p.resolve().name or "input"
    if stat.S_ISDIR(st.st_mode):
        # a policy sweep keeps a journal too: its sweep.json says which it is
        if (p / "sweep.json").is_file():
            doc = _json_object(p / "sweep.json", "policy sweep manifest")
            if doc.get("kind") == POLICY_SWEEP_KIND:
                return BundleInput(p, "policy-sweep", name, run_id=_str(doc.get("run_id")))
        if (p / "journal.jsonl").is_file():
            return _run_input(p, name)
        raise RunDirError(f"{p} is not a run directory (no journal.jsonl), nor a policy sweep "
                          "(no sweep.json of kind aorta-tui/policy-sweep)", hint=hint)
    if stat.S_ISREG(st.st_mode):
        # Only the kind and the run id are read, not the typed result or sweep
        # (hwqueue/result_doc.py): a bundle carries a file as it is, damage included (the
        # evidence is why it is sent), so a damaged field must not keep it out.
        doc = _json_object(p, "queue result", hint=hint)
        if doc.get("kind") in QUEUE_KINDS:
            return BundleInput(p, "queue-result", name, run_id=_str(doc.get("run_id")))
        raise RunDirError(f"{p}: kind {clip_for_message(doc.get('kind'))} is not a queue result "
                          f"({' or '.join(QUEUE_KINDS)})", hint=hint)
    raise RunDirError(f"{p} is neither a directory nor a regular file", hint=hint)


def _run_input(p: Path, name: str) -> BundleInput:
    redaction = recipe_redaction(p / "recipe.resolved.yaml")
    from aorta_tui.store.lock import describe_holder, lock_holder

    holder = lock_holder(p)
    return BundleInput(p, "run", name, recipe_hash=_run_meta(p).recipe_hash,
                       run_id=p.name, redaction=redaction,
                       running=describe_holder(holder) if holder is not None else None)


def _run_meta(p: Path) -> RunMeta:
    """The run's run.json, typed; none, or one whose fields are damaged, is an empty one. A
    bundle carries a run as it is, damage included (the evidence is why it is sent), so a
    damaged field costs the manifest its recipe hash, never the bundle; text that is no JSON
    object is refused, as it always was."""
    from aorta_tui.store.naming import RUN_META
    from aorta_tui.store.run_meta import RunMeta

    path = p / RUN_META
    if not path.is_file():
        return RunMeta()
    doc = _json_object(path, "run record")
    try:
        return RunMeta.from_dict(doc, where=str(path))
    except UsageError:
        return RunMeta()


def _json_object(path: Path, what: str, hint: str | None = None) -> dict[str, Any]:
    from aorta_tui.core.inputs import parse_json_text, require_object

    text = read_input_text(path, what=what, limit=MAX_FILE_BYTES, hint=hint)
    return require_object(parse_json_text(text, where=str(path), what=what), where=str(path),
                          what=what)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# -- redaction rules from files ------------------------------------------------------------
def recipe_redaction(path: Path) -> RedactionConfig:
    """The ``redaction:`` section of a run's resolved recipe, validated as the recipe loader
    validates it (an absent file or section: no rules)."""
    if not path.is_file():
        return RedactionConfig()
    data, marks = _yaml(path, "resolved recipe")
    if not isinstance(data, dict) or data.get("redaction") is None:
        return RedactionConfig()
    return _validated(data, marks, path, wrapped=True)


def load_redaction_file(path: Path) -> RedactionConfig:
    """``--redaction-from FILE``: YAML or JSON with the recipe section's keys, at the top or
    under ``redaction:``."""
    data, marks = _yaml(path, "redaction file")
    if isinstance(data, dict) and set(data) == {"redaction"}:
        return _validated(data, marks, path, wrapped=True)
    return _validated({"redaction": data}, marks, path, wrapped=False)


def _yaml(path: Path, what: str) -> tuple[Any, Any]:
    from aorta_tui.recipe.loader import LoadProblem, parse_yaml_text

    hint = "a mapping of scrub_env_keys: [GLOB, ...], scrub_paths: true|false, " \
           "scrub_ip_addresses: true|false"
    text = read_input_text(path, what=what, limit=REDACTION_FILE_LIMIT, hint=hint)
    try:
        return parse_yaml_text(text)
    except LoadProblem as exc:
        where = f"{path}:{exc.line}:{exc.column}" if exc.line else str(path)
        raise UsageError(exc.message, location=where, hint=exc.hint or hint) from None


def _validated(data: dict[str, Any], marks: Marks, path: Path, *, wrapped: bool) -> RedactionConfig:
    from aorta_tui.recipe.checks import BAD, Validator
    from aorta_tui.recipe.validate import _redaction

    v = Validator(marks, str(path), None)
    # keys at the top of a --redaction-from file are located there, not under redaction.
    got = _redaction(v, data) if wrapped else _top_level_redaction(v, data["redaction"])
    if got is BAD or v.issues:
        issue = v.issues[0]
        more = f" (and {len(v.issues) - 1} more)" if len(v.issues) > 1 else ""
        raise RecipeError(issue.render(str(path)) + more)
    return RedactionConfig(tuple(got.scrub_env_keys), bool(got.scrub_paths),
                           bool(got.scrub_ip_addresses))


def _top_level_redaction(v: Validator, raw: object) -> Redaction | Bad:
    from aorta_tui.recipe import keys as K
    from aorta_tui.recipe.checks import BAD
    from aorta_tui.recipe.model import Redaction

    if v.mapping("", raw, K.REDACTION_KEYS, what="a mapping of redaction rules") is BAD \
            or not isinstance(raw, dict):
        return BAD
    keys = v.str_list("scrub_env_keys", raw.get("scrub_env_keys") or [], what="variable-name globs")
    paths = v.boolean("scrub_paths", raw.get("scrub_paths", False))
    ips = v.boolean("scrub_ip_addresses", raw.get("scrub_ip_addresses", False))
    if keys is BAD or paths is BAD or ips is BAD:
        return BAD
    return Redaction(scrub_env_keys=tuple(keys), scrub_paths=paths, scrub_ip_addresses=ips)


# -- the bundle ----------------------------------------------------------------------------
@dataclass
class BundleRequest:
    inputs: list[BundleInput]
    extra: RedactionConfig = field(default_factory=RedactionConfig)
    hostnames: bool = False
    max_log_bytes: int | None = None
    name: str = "bundle"

    @functools.cached_property
    def scrubbed_hosts(self) -> tuple[str, ...]:
        """The host names every input's scrubber hides (``--hostnames``), looked up once (the
        lock files, a DNS name) for the scrubbers and the manifest's count of them."""
        return _hostnames(self.inputs) if self.hostnames else ()


def check_max_log_bytes(value: int | None) -> None:
    if value is not None and value < MIN_MAX_LOG_BYTES:
        raise UsageError(f"--max-log-bytes {value}: at least {MIN_MAX_LOG_BYTES} bytes",
                         hint="keep at least 1 KiB of each log (head and tail), e.g. 1048576")


def _hostnames(inputs: list[BundleInput]) -> tuple[str, ...]:
    """This machine's names and the host every run's lock file recorded."""
    names = {socket.gethostname(), socket.getfqdn()}
    for inp in inputs:
        lock = inp.path / ".lock" if inp.kind == "run" else None
        if lock is not None:
            record = read_json_or_none(lock, limit=4096)
            host = record.get("host") if isinstance(record, dict) else None
            if isinstance(host, str):
                names.add(host)
    out = set()
    for n in names:
        if n and n not in ("localhost", "localhost.localdomain"):
            out.add(n)
            out.add(n.split(".")[0])
    return tuple(sorted(out))


def _scrubbers(req: BundleRequest) -> dict[str, Scrubber]:
    hosts = req.scrubbed_hosts
    values: dict[str, str] = {}  # one set of learned secret values for every input
    aliases: dict[str, int] = {}  # and one numbering of the names that had to be scrubbed
    out = {}
    for inp in req.inputs:
        cfg = inp.redaction.merged(req.extra)
        cfg = RedactionConfig(cfg.scrub_env_keys, cfg.scrub_paths, cfg.scrub_ip_addresses, hosts)
        out[inp.name] = Scrubber(cfg, values, aliases=aliases)
    # The values the trials ran with, by the keyed hashes each run kept (any run's value is
    # hidden in every input: one run's log may print another's token).
    ledgers = [h for inp in req.inputs if inp.kind in _KEEPS_HASHES
               and (h := load_secret_hashes(inp.path)) is not None]
    for scrub in out.values():
        scrub.ledgers = ledgers
    # The secrets of the shell that bundles (often the one that ran the sweep) are hidden too.
    first = next(iter(out.values()))
    for key, value in os.environ.items():
        if is_secret_name(key):
            first.learn(value, "secret_env")
    return out


# the inputs whose trials' secrets are kept as keyed hashes: a recipe sweep's or a queue
# sweep's run directory ("run") and a policy sweep's
_KEEPS_HASHES = ("run", "policy-sweep")


def _never_read(inp: GatherInput, rel: str) -> str | None:
    if inp.kind in _KEEPS_HASHES and rel == SECRET_HASHES_FILE:
        return HASHES_NOTE
    return None


def _first_pass(req: BundleRequest, scrubbers: dict[str, Scrubber], spool: Spool
                ) -> list[Gathered]:
    """The one read: every file's bytes into ``spool``, and every secret value they (and
    every file name) show learned, so the second pass hides it wherever it appears."""
    entries: list[Gathered] = []
    for entry, data in gather(req.inputs, spool, _never_read):
        scrub = scrubbers[entry.inp.name]
        scrub.learn_text(entry.rel)  # a name can hold a secret: token=hf_x.log
        entries.append(entry)
        if data is None:
            continue
        try:
            learn_data(data, entry.rel, scrub)
        except Unscannable as exc:
            entry.skipped = str(exc)  # left out in the second pass
    return entries


def iter_results(req: BundleRequest) -> Iterator[FileResult]:
    """Every file of the bundle, read once, cut (``--max-log-bytes``) and redacted, in
    order: the bytes scanned are the bytes archived."""
    check_max_log_bytes(req.max_log_bytes)
    scrubbers = _scrubbers(req)
    spool = Spool()
    try:
        entries = _first_pass(req, scrubbers, spool)
        used: set[str] = set()
        for entry in entries:
            yield _second_pass(req, entry, scrubbers[entry.inp.name], spool, used)
    finally:
        spool.close()


def _second_pass(req: BundleRequest, entry: Gathered, scrub: Scrubber, spool: Spool,
                 used: set[str]) -> FileResult:
    inp = entry.inp
    arcpath = f"{inp.name}/{entry.rel}" if inp.kind != "queue-result" else inp.name
    # a name can leak too: collect_paths copies /home/alice/x to collected/home/alice/x
    renamed = _unique(scrub.scrub_name(arcpath), used)
    source = inp.path / entry.rel if inp.kind != "queue-result" else inp.path
    if entry.skipped is not None:
        return FileResult(renamed, source, None, skipped=entry.skipped,
                          renamed=renamed != arcpath)
    data = spool.get(entry.offset, entry.size)
    res = FileResult(renamed, source, data, mode=entry.mode, mtime=entry.mtime,
                     source_size=len(data), source_sha256=hashlib.sha256(data).hexdigest(),
                     renamed=renamed != arcpath)
    if req.max_log_bytes is not None and entry.rel.endswith(LOG_SUFFIXES) \
            and len(data) > req.max_log_bytes and b"\x00" not in data:
        data, res.truncated = cut_log(data, req.max_log_bytes)
    try:
        res.data, res.hits, res.compressed = scrub_data(data, entry.rel, scrub)
    except Unscannable as exc:
        return FileResult(renamed, source, None, skipped=str(exc), renamed=renamed != arcpath)
    res.binary = res.compressed is None and b"\x00" in data
    return res


def _unique(name: str, used: set[str]) -> str:
    out, n = name, 2
    while out in used:
        out = f"{name}.{n}"
        n += 1
    used.add(out)
    return out


def cut_log(data: bytes, limit: int) -> tuple[bytes, dict[str, int]]:
    """The head and the tail of ``data`` (about ``limit`` bytes in all, cut at line ends when
    one is near) around one marker line saying how much was left out."""
    half = limit // 2
    head = data[:half]
    nl = head.rfind(b"\n")
    if nl >= half // 2:
        head = head[: nl + 1]
    tail = data[len(data) - half:]
    nl = tail.find(b"\n")
    if 0 <= nl < half // 2:
        tail = tail[nl + 1:]
    cut = len(data) - len(head) - len(tail)
    lead = "" if head.endswith(b"\n") else "\n"
    marker = (f"{lead}[aorta-tui bundle: {cut} bytes cut from the middle of this log "
              f"(--max-log-bytes {limit})]\n").encode()
    return head + marker + tail, {"source_bytes": len(data), "kept_head": len(head),
                                  "kept_tail": len(tail), "cut_bytes": cut}


# -- writing -------------------------------------------------------------------------------
def check_output(output: Path, inputs: list[BundleInput]) -> None:
    """Refuse, before anything is read, an output that cannot be written."""
    hint = "pass -o PATH in a directory you can write, e.g. -o ticket.tar.gz"
    if output.is_dir():
        raise UsageError(f"{output} is a directory, not an archive name", hint=hint)
    parent = output.parent
    if not parent.is_dir():
        raise UsageError(f"{output}: the directory {parent} does not exist", hint=hint)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise EnvironmentProblem(f"{output}: cannot write in {parent} (permission denied)",
                                 hint=hint)
    out = output.resolve()
    for inp in inputs:
        if inp.kind == "queue-result" and (out == inp.path.resolve() or _same_file(output, inp.path)):
            raise UsageError(f"{output} is the input {inp.path}: the archive would replace the "
                             "result it bundles", hint="pass -o with another name, e.g. -o "
                             f"{inp.path.stem}.bundle.tar.gz")
        if inp.kind != "queue-result" and out.is_relative_to(inp.path.resolve()):
            raise UsageError(f"{output} is inside {inp.path}: the next bundle would hold this one",
                             hint="write the archive outside the run directory")


def _same_file(a: Path, b: Path) -> bool:
    """One file under two names (a hard link, a bind mount): replacing one replaces both."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def archive_name(output: Path) -> str:
    name = output.name
    for suffix in (".tar.gz", ".tgz", ".gz", ".tar"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def build_bundle(req: BundleRequest, output: Path) -> BundleManifest:
    """Write the archive atomically; returns its manifest."""
    from aorta_tui.core.atomic import atomic_open_binary

    check_output(output, req.inputs)
    root = archive_name(output)
    files: list[ManifestFile] = []
    try:
        with atomic_open_binary(output) as fh, \
                tarfile.open(fileobj=fh, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for res in iter_results(req):
                files.append(res.manifest_entry())
                if res.data is not None:
                    _add(tar, f"{root}/{res.arcpath}", res.data, res.mode, res.mtime)
            manifest = make_manifest(req, files)
            _add(tar, f"{root}/{MANIFEST_NAME}", manifest.to_bytes(), 0o644,
                 _dt.datetime.now().timestamp())
    except OSError as exc:
        where = exc.filename or output
        raise EnvironmentProblem(f"{where}: cannot write the bundle: {exc.strerror or exc}",
                                 hint="free space or pick another -o; nothing was written") from None
    return manifest


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(mtime)
    info.uid = info.gid = 0
    info.uname = info.gname = ""  # the owner's name would tell who ran it
    tar.addfile(info, io.BytesIO(data))


ALWAYS_RULES = ("secret_env", "secret_value", "secret_keyword", "trial_secret",
                "url_credentials", "bearer_token", "private_key", "home_user",
                "secret_context", "token_format", "encoded_secret")


def scanner_rules() -> list[str]:
    """The detect-secrets plugins the bundle used (their rule names)."""
    from aorta_tui.bundle.scanner import scanner_patterns

    return sorted({rule for rule, _rx in scanner_patterns()})


def make_manifest(req: BundleRequest, files: list[ManifestFile]) -> BundleManifest:
    from aorta_tui import __version__

    return BundleManifest(
        tool_version=__version__,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        inputs=tuple(_manifest_input(i, req.extra, len(req.scrubbed_hosts)) for i in req.inputs),
        rules=ManifestRules(always=ALWAYS_RULES, scanner=tuple(scanner_rules()),
                            hostnames=req.hostnames, max_log_bytes=req.max_log_bytes),
        totals=ManifestTotals.of(files), files=tuple(files))


def _manifest_input(inp: BundleInput, extra: RedactionConfig, hosts: int) -> ManifestInput:
    # ``hosts``: how many host names the scrubbers hid (never which). It counted the input's
    # own rules, which never hold them (_scrubbers adds them), so --hostnames said 0.
    cfg = inp.redaction.merged(extra)
    return ManifestInput(
        name=inp.name, kind=inp.kind, run_id=inp.run_id, recipe_hash=inp.recipe_hash,
        running=inp.running is not None,
        redaction=InputRedaction(cfg.scrub_env_keys, cfg.scrub_paths, cfg.scrub_ip_addresses,
                                 hostnames=hosts))


@dataclass(frozen=True)
class BundleReview:
    """What a bundle would do: ``rows``, one per redaction (the secret never shown); ``notes``,
    what it would list without redacting (binary, skipped, cut); ``scanned``, how many files it
    read (so "0 redactions" says of how many files, not of none)."""

    rows: list[dict[str, Any]]
    notes: list[dict[str, Any]]
    scanned: int

    def redacted_files(self) -> int:
        return len({r["file"] for r in self.rows})


def review_bundle(req: BundleRequest) -> BundleReview:
    """What a bundle of ``req`` would redact and list; nothing is written."""
    rows: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    scanned = 0
    for res in iter_results(req):
        scanned += res.skipped is None  # a left-out file (too large, unreadable) was not read
        for h in res.hits:
            rows.append({"rule": h.rule, "file": res.arcpath, "line": h.line, "where": h.where,
                         "before": h.shown_before(), "after": h.after})
        if res.renamed:
            notes.append({"file": res.arcpath, "note": "its path was redacted"})
        if res.binary:
            notes.append({"file": res.arcpath, "note": BINARY_NOTE})
        elif res.skipped:
            notes.append({"file": res.arcpath, "note": f"left out: {res.skipped}"})
        if res.truncated:
            notes.append({"file": res.arcpath,
                          "note": f"cut to head and tail: {res.truncated['cut_bytes']} bytes left out"})
    rows.sort(key=lambda r: (severity(r["rule"]), r["file"], r["line"]))  # secrets first
    return BundleReview(rows, notes, scanned)


# the review's order: what would leak a credential first, then who and where, then layout
_SEVERITY = {"scrub_env_keys": 1, "home_user": 2, "hostname": 3, "scrub_ip_addresses": 4,
             "scrub_paths": 5}


def severity(rule: str) -> int:
    """0 for every rule that hides a secret, then user names, hosts, addresses, paths."""
    return _SEVERITY.get(rule, 0)
