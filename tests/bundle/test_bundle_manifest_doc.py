"""A bundle's MANIFEST.json as a typed value (bundle/manifest_doc.py): manifests the untyped
writer wrote read back to the same bytes; build_bundle writes the type and read_manifest reads
it back out of the archive; a damaged manifest or archive is a located UsageError (exit 2)."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.bundle import archive
from aorta_tui.bundle.manifest_doc import (
    WHAT,
    BundledFile,
    BundleManifest,
    InputRedaction,
    ManifestInput,
    ManifestRules,
    ManifestTotals,
    RuleCount,
    SkippedFile,
    read_manifest,
)
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from tests.engine_support import set_at_path

FIXTURES = Path(__file__).parent / "fixtures" / "old-writer-manifests"
WRITTEN = sorted(FIXTURES.glob("*.json"))
CUT = FIXTURES / "run-cut-binary-compressed-skipped.json"


@pytest.mark.parametrize("path", WRITTEN, ids=[p.name for p in WRITTEN])
def test_manifests_the_untyped_writer_wrote_read_back_to_the_same_bytes(path: Path) -> None:
    manifest = BundleManifest.from_dict(json.loads(path.read_bytes()), where=str(path))
    assert manifest.to_bytes() == path.read_bytes()
    assert manifest.totals == ManifestTotals.of(manifest.files)


def test_the_typed_value_holds_what_the_bundle_recorded() -> None:
    m = BundleManifest.from_dict(json.loads(CUT.read_text()))
    files = {f.path.split("/", 1)[1]: f for f in m.files}
    binary, packed, cut = (files["trials/c/trial-000/bin.dat"], files["trials/c/trial-000/x.gz"],
                           files["trials/c/trial-000/big.log"])
    assert isinstance(binary, BundledFile) and binary.binary and binary.note
    assert isinstance(packed, BundledFile) and packed.compressed == "gzip" and packed.redacted
    assert isinstance(cut, BundledFile) and cut.truncated and cut.truncated["cut_bytes"] > 0
    assert not cut.identical and cut.redactions[0] == RuleCount("secret_env", cut.redactions[0].count)
    assert isinstance(files["trials/c/trial-000/link"], SkippedFile)
    assert m.rules.max_log_bytes == 2048 and m.inputs[0].kind == "run"


# -- build_bundle writes it, read_manifest reads it ------------------------------------------


def _run(tmp: Path) -> Path:
    run = tmp / "run1"
    trial = run / "trials" / "c" / "trial-000"
    trial.mkdir(parents=True)
    (run / "journal.jsonl").write_text('{"event":"run_started"}\n')
    (trial / "stdout.log").write_text("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF12\nok\n")
    (trial / "bin.dat").write_bytes(b"abc\x00def")
    (trial / "x.gz").write_bytes(gzip.compress(b"plain\n"))
    (trial / "big.log").write_text("".join(f"line {i}\n" for i in range(3000)))
    (trial / "link").symlink_to("/etc/passwd")
    return run


def test_a_bundle_written_reads_back_to_its_manifest(tmp_path: Path) -> None:
    req = archive.BundleRequest(archive.find_inputs([_run(tmp_path)]), max_log_bytes=2048)
    out = tmp_path / "ticket.tar.gz"
    written = archive.build_bundle(req, out)
    again = read_manifest(out)
    assert again == written
    with tarfile.open(out) as tar:
        member = tar.extractfile("ticket/MANIFEST.json")
        assert member is not None and member.read() == written.to_bytes()
    t = written.totals
    assert (t.files, t.skipped, t.binary_files, t.compressed_files, t.truncated_files,
            t.redacted_files) == (5, 1, 1, 1, 1, 1)
    assert t.redactions == {"secret_env": 1}


def _archive(tmp: Path, members: dict[str, bytes], name: str = "b.tar.gz") -> Path:
    out = tmp / name
    with tarfile.open(out, "w:gz") as tar:
        for arcname, data in members.items():
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def test_an_inputs_own_manifest_is_not_the_bundles(tmp_path: Path) -> None:
    deep = _archive(tmp_path, {"b/run/MANIFEST.json": CUT.read_bytes(), "b/run/x": b"x"})
    with pytest.raises(UsageError, match=rf"^{deep}: no <name>/MANIFEST\.json in it"):
        read_manifest(deep)
    ok = _archive(tmp_path, {"b/run/MANIFEST.json": b"{}", "b/MANIFEST.json": CUT.read_bytes()},
                  "ok.tar.gz")
    assert read_manifest(ok).to_bytes() == CUT.read_bytes()


def test_what_is_no_bundle_is_a_located_error(tmp_path: Path) -> None:
    torn = tmp_path / "torn.tar.gz"
    torn.write_bytes(_archive(tmp_path, {"b/MANIFEST.json": CUT.read_bytes()}).read_bytes()[:60])
    with pytest.raises(UsageError, match=rf"^{torn}: not a readable bundle archive"):
        read_manifest(torn)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=str(fifo)):
        read_manifest(fifo)  # refused before it is read: never waits for a writer
    bad = _archive(tmp_path, {"b/MANIFEST.json": CUT.read_bytes()[:200]}, "bad.tar.gz")
    with pytest.raises(UsageError, match=rf"^{bad}:b/MANIFEST\.json:\d+:\d+"):
        read_manifest(bad)


def test_an_oversize_manifest_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = _archive(tmp_path, {"b/MANIFEST.json": CUT.read_bytes()})
    monkeypatch.setitem(INPUT_LIMITS, WHAT, 1024)
    with pytest.raises(UsageError, match=rf"^{big}:b/MANIFEST\.json: the bundle manifest is "
                                         r".* over the 1\.0 KiB limit"):
        read_manifest(big)


# -- damaged documents: a located error ----------------------------------------------------

DAMAGED: list[tuple[tuple[Any, ...], object, str]] = [
    (("schema_version",), "1", "schema_version: expected"),
    (("created",), 5, "created: expected"),
    (("inputs", 0, "running"), "no", "inputs[0].running: expected"),
    (("inputs", 0, "redaction", "scrub_env_keys"), ["A*", 1],
     "inputs[0].redaction.scrub_env_keys[1]: expected"),
    (("rules", "max_log_bytes"), "2k", "rules.max_log_bytes: expected"),
    (("totals", "files"), 1.5, "totals.files: expected"),
    (("totals", "redactions", "secret_env"), "76", "totals.redactions.secret_env: expected"),
    (("files", 0), [], "files[0]: expected"),
    (("files", 0, "size"), "1", "files[0].size: expected"),
    (("files", 0, "redactions"), {}, "files[0].redactions: expected"),
    (("files", 0, "truncated"), [], "files[0].truncated: expected"),
]


@pytest.mark.parametrize(("path", "value", "field"), DAMAGED, ids=[m for _p, _v, m in DAMAGED])
def test_a_wrongly_typed_field_is_named_with_the_file(path: tuple[Any, ...], value: object,
                                                      field: str) -> None:
    doc = json.loads(CUT.read_text())
    set_at_path(doc, path, value)
    with pytest.raises(UsageError) as caught:
        BundleManifest.from_dict(doc, where="b.tar.gz:b/MANIFEST.json")
    assert caught.value.message.startswith(f"b.tar.gz:b/MANIFEST.json: {field}")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


def test_missing_parts_and_another_kind() -> None:
    doc = json.loads(CUT.read_text())
    for key in ("rules", "totals"):
        with pytest.raises(UsageError, match=f"MANIFEST.json: {key}: missing"):
            BundleManifest.from_dict({k: v for k, v in doc.items() if k != key})
    with pytest.raises(UsageError, match=r"files\[2\]\.path: missing"):
        del doc["files"][2]["path"]
        BundleManifest.from_dict(doc)
    with pytest.raises(UsageError, match="is not a bundle manifest"):
        BundleManifest.from_dict({**doc, "kind": "aorta-tui/policy-sweep"})


# -- properties ----------------------------------------------------------------------------

_text = st.text(max_size=8)
_n = st.integers(0, 2**40)
_bundled = st.builds(
    BundledFile, path=_text, size=_n, sha256=_text, source_size=_n, source_sha256=_text,
    identical=st.booleans(), binary=st.booleans(), compressed=st.none() | _text,
    renamed=st.booleans(), redacted=st.booleans(),
    redactions=st.lists(st.builds(RuleCount, _text, _n), max_size=2).map(tuple),
    truncated=st.none() | st.dictionaries(_text, _n, max_size=3), note=st.none() | _text)
_skipped = st.builds(SkippedFile, path=_text, skipped=st.none() | _text, renamed=st.booleans())
_inputs = st.builds(
    ManifestInput, name=_text, kind=_text, run_id=st.none() | _text,
    recipe_hash=st.none() | _text, running=st.booleans(),
    redaction=st.builds(InputRedaction, st.lists(_text, max_size=2).map(tuple), st.booleans(),
                        st.booleans(), st.integers(0, 9)))
_manifests = st.lists(_bundled | _skipped, max_size=4).map(tuple).flatmap(lambda files: st.builds(
    BundleManifest, tool_version=_text, created=_text, inputs=st.lists(_inputs, max_size=2).map(tuple),
    rules=st.builds(ManifestRules, st.lists(_text, max_size=2).map(tuple),
                    st.lists(_text, max_size=2).map(tuple), st.booleans(), st.none() | _n),
    totals=st.just(ManifestTotals.of(files)), files=st.just(files),
    schema_version=st.integers(1, 3)))


@given(_manifests)
def test_any_manifest_reads_back_to_itself_and_its_bytes(manifest: BundleManifest) -> None:
    written = manifest.to_bytes()
    again = BundleManifest.from_dict(json.loads(written))
    assert again == manifest
    assert again.to_bytes() == written
