"""`aorta-tui bundle RUN_DIR ...`: one redacted tar.gz with a manifest, to hand a triage on."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from aorta_tui.cli.common import check_output_file, cli_command, count, err
from aorta_tui.cli.trust_opts import TRUST_OPT
from aorta_tui.store.trust_guard import guard_run_dir

if TYPE_CHECKING:  # the archive module loads only when a bundle is made
    from aorta_tui.bundle.archive import BundleRequest, BundleReview
    from aorta_tui.bundle.manifest_doc import BundleManifest


@cli_command
def bundle(
    inputs: list[Path] = typer.Argument(  # noqa: B008 - typer reads its defaults this way
        ..., metavar="RUN_DIR...",
        help="Run directories, policy sweep directories or queue result files."),
    output: Path | None = typer.Option(  # noqa: UP007 - typer needs Optional on 3.10
        None, "-o", "--output", help="The archive to write (default ./<first input>.bundle.tar.gz)."),
    review: bool = typer.Option(False, "--review",
                                help="Show every finding with its rule's name (rule, file, line, "
                                     "before -> after; secrets masked) and what is left out; "
                                     "write nothing."),
    redaction_from: Path | None = typer.Option(  # noqa: UP007
        None, "--redaction-from", metavar="FILE",
        help="YAML/JSON with scrub_env_keys, scrub_paths, scrub_ip_addresses (added to each "
             "run's recipe redaction)."),
    max_log_bytes: int | None = typer.Option(  # noqa: UP007
        None, "--max-log-bytes", metavar="N", parser=count(at_least=0, at_most=2**62),
        help="Keep the head and tail of each *.log larger than N bytes, with a marker line."),
    hostnames: bool = typer.Option(False, "--hostnames",
                                   help="Also replace this machine's and the runs' hostnames."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest (or the review) as JSON."),
    trust_run_dir: bool = TRUST_OPT,
) -> None:
    """Package runs into one archive for another team, with secrets and user names scrubbed.

    Every text file (logs, snapshots, journals, results) goes through the redaction rules: the
    values of secret-looking variables and home-directory user names always, the recipe's
    `redaction:` section and --redaction-from on request, hostnames with --hostnames; token
    formats (detect-secrets), private keys, URL passwords, random values next to a secret's
    name and the values the trials ran with (by their keyed hashes) always. Binary files are
    scanned as bytes, gzip/bz2/xz inside; what cannot be scanned (zip, tar, ...), hard links,
    other users' files and symlinks are left out and listed in MANIFEST.json (every file with
    its size and sha256, what was redacted and by which rule). The archive is written
    atomically: an interrupted bundle leaves nothing.

    Examples:

      aorta-tui bundle aorta-out/T-1/20261201-101500-ab12 -o T-1.tar.gz

      aorta-tui bundle RUN_DIR --review

      aorta-tui bundle RUN_A RUN_B --redaction-from scrub.yaml --max-log-bytes 1048576
    """
    from aorta_tui.bundle import archive

    req, output = _request(inputs, output, redaction_from=redaction_from,
                           max_log_bytes=max_log_bytes, hostnames=hostnames, trusted=trust_run_dir)
    if review:
        _print_review(archive.review_bundle(req), as_json=as_json)
        return
    _print_written(archive.build_bundle(req, output), output, as_json=as_json)


def _request(inputs: list[Path], output: Path | None, *, redaction_from: Path | None,
             max_log_bytes: int | None, hostnames: bool, trusted: bool
             ) -> tuple[BundleRequest, Path]:
    """Every input checked (and trusted) before anything of a run is read; the request and
    where the archive goes."""
    from aorta_tui.bundle import archive

    archive.check_max_log_bytes(max_log_bytes)
    check_output_file(output)
    for path in inputs:  # before anything of a run is read (core/run_trust.py)
        if path.exists():  # a missing one: find_inputs says so, located
            guard_run_dir(path, ["bundle", *map(str, inputs)], trusted=trusted, say=err)
    found = archive.find_inputs(list(inputs))
    for inp in found:
        if inp.running is not None:  # not an error: a hang is often bundled while it hangs
            err(f"warning: {inp.path} is still running ({inp.running}): the bundle holds it as "
                "it is now, its running trial cut short")
    extra = archive.load_redaction_file(redaction_from) if redaction_from is not None else None
    if output is None:
        output = Path(f"{found[0].name}.bundle.tar.gz")
    req = archive.BundleRequest(found, hostnames=hostnames, max_log_bytes=max_log_bytes,
                                name=archive.archive_name(output))
    if extra is not None:
        req.extra = extra
    return req, output


def _print_written(manifest: BundleManifest, output: Path, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(manifest.to_json(), indent=2, ensure_ascii=False))
        return
    t = manifest.totals
    rules = ", ".join(f"{r} {n}" for r, n in t.redactions.items()) or "nothing matched"
    print(f"wrote {output}: {t.files} files ({t.redacted_files} redacted, "
          f"{t.binary_files} binary, {t.truncated_files} cut, {t.skipped} skipped)")
    print(f"  redactions: {rules}")
    print("  MANIFEST.json lists every file with its sha256 and what was redacted in it")


def _print_review(review: BundleReview, *, as_json: bool) -> None:
    rows, notes = review.rows, review.notes
    if as_json:
        print(json.dumps({"redactions": rows, "notes": notes, "scanned_files": review.scanned},
                         indent=2, ensure_ascii=False))
        return
    summarised = ("scrub_paths",)  # hundreds of path rewrites would bury the few secrets
    for r in rows:
        if r["rule"] in summarised:
            continue
        where = f"{r['file']}:{r['line']}" if r["line"] else r["file"]
        if r["where"]:
            where += f" ({r['where']})"
        print(f"{r['rule']:<20} {where}: {r['before']} -> {r['after']}")
    for rule in summarised:
        files = Counter(r["file"] for r in rows if r["rule"] == rule)
        if files:
            print(f"{rule:<20} {sum(files.values())} rewrites in {len(files)} files (--json "
                  "lists each)")
    for n in notes:
        print(f"{'note':<20} {n['file']}: {n['note']}")
    print(f"review: {len(rows)} redactions in {review.redacted_files()} of {review.scanned} files "
          "scanned; nothing written (run without --review to write the archive)")
