"""Every secret form of the corpus (tests/bundle/plant_corpus.py), planted by a real probe trial
in stdout (with a NUL byte), stderr, a result file, a collector's output (a stand-in rocprofv3
on PATH) and a gzip artifact, is absent from the archive and from every member inside it
(gzip members decompressed), while the files themselves are there with their plain evidence.

The sweep runs from a shell holding AWS_SECRET_ACCESS_KEY; the bundle from one without it, in a
fresh working directory with the default output directory (aorta-out).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from tests.bundle import plant_corpus as corpus
from tests.engine_support import aorta, only_run_dir

PLANT = Path(corpus.__file__)
RECIPE = """\
schema_version: 1
mode: probe
ticket: T-CORPUS
trials: 1
timeout_per_trial: 60
mitigation_axis: [corpus_sidecar]
diagnostic_axis: [none]
collect:
  rocprof: {}
"""


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("corpus")
    bindir = base / "bin"
    bindir.mkdir()
    fake = bindir / "rocprofv3"  # the collector: a real program the sweep finds on PATH
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} {PLANT} \"$@\"\n")
    fake.chmod(0o755)
    (base / "probe.yaml").write_text(RECIPE)
    (base / "sidecar.json").write_text(json.dumps(corpus.sidecar(), ensure_ascii=False))
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "ROCPROF_BIN": "",
           "AWS_SECRET_ACCESS_KEY": corpus.AWS_SECRET,
           "CI_EXTRA_ARGS": f"--hf-token {corpus.ENV_PRINTED}"}  # the trial prints it
    proc = aorta("sweep", "run", "--recipe", "probe.yaml", "--mitigations-file", "sidecar.json",
                 "--no-snapshot", "--", sys.executable, str(PLANT),
                 "--api-key", corpus.ARG_SECRET, cwd=base, env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run_dir(base / "aorta-out")
    trial = run / f"trials/{corpus.SIDECAR_MITIGATION}-none/trial-000"
    # each place holds its own values, or this test proves nothing
    where = {"stdout": trial / "stdout.log", "stderr": trial / "stderr.log",
             "result": trial / "probe_result.json", "gzip": trial / "trace.log.gz",
             "collector": trial / "rocprof/aorta_kernel_stats.csv",
             "sidecar": trial / "stdout.log"}  # the trial prints the sidecar's variables
    for place, path in where.items():
        data = path.read_bytes()
        data = gzip.decompress(data) if place == "gzip" else data
        for form, value in corpus.planted(place).items():
            if form.startswith("wide_wrapped"):
                continue  # written across a line end: its pieces are there
            needle = json.dumps(value)[1:-1] if place == "result" else value
            assert needle.encode() in data or value.encode() in data, (place, form)
    assert b"\x00" in where["stdout"].read_bytes()
    # the sidecar's values are also in the run's own records of the cell's environment
    sidecar_token = corpus.planted("sidecar")["github_token"]
    for record in ("plan.json", "matrix.json"):
        assert sidecar_token in (run / record).read_text(), record
    # the sweep kept the keyed hash of the trial's AWS secret, never the value (mode 0600)
    hashes = run / "secret-hashes.json"
    assert corpus.AWS_SECRET.encode() not in hashes.read_bytes()
    assert "AWS_SECRET_ACCESS_KEY" in {e["name"] for e in json.loads(hashes.read_text())["hashes"]}
    assert hashes.stat().st_mode & 0o777 == 0o600
    return run


def _members(root: Path) -> dict[str, bytes]:
    """Every file of the extracted archive, and every gzip member decompressed (recursively)."""
    out: dict[str, bytes] = {}
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            out[p.relative_to(root).as_posix()] = data
            depth = 0
            while data[:2] == b"\x1f\x8b" and depth < 4:
                data = gzip.decompress(data)
                depth += 1
                out[f"{p.relative_to(root).as_posix()}!{depth}"] = data
    return out


def _bundle_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "AWS_SECRET_ACCESS_KEY"}
    assert corpus.AWS_SECRET not in "".join(env.values())
    return env


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_no_planted_form_survives_in_any_member(corpus_run, tmp_path):
    work = tmp_path / "fresh"  # a fresh working directory, as a user bundles
    work.mkdir()
    shutil.copytree(corpus_run.parents[2], work, dirs_exist_ok=True, symlinks=True)
    rel = corpus_run.relative_to(corpus_run.parents[2])  # aorta-out/T-CORPUS/<run-id>
    env = _bundle_env()
    proc = _run_clean(["bundle", str(rel), "-o", "ticket.tar.gz", "--json"], work, env)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    with tarfile.open(work / "ticket.tar.gz") as tar:
        tar.extractall(work / "x", filter="data")
    members = _members(work / "x")
    values = {(place, form): value for place in corpus.PLACES
              for form, value in corpus.planted(place).items()}
    leaks = [(place, form, name) for (place, form), value in values.items()
             for name, data in members.items()
             if value.encode() in data or json.dumps(value)[1:-1].encode() in data]
    assert leaks == []
    # the files are in the archive, with their evidence: nothing passed by being left out
    entries = {f["path"]: f for f in manifest["files"]}
    trial = f"{rel.name}/trials/{corpus.SIDECAR_MITIGATION}-none/trial-000"
    for name in ("stdout.log", "stderr.log", "probe_result.json", "trace.log.gz",
                 "rocprof/aorta_kernel_stats.csv"):
        entry = entries[f"{trial}/{name}"]
        assert "skipped" not in entry and entry["redacted"], name
        data = members[f"ticket/{trial}/{name}" + ("!1" if name.endswith(".gz") else "")]
        assert corpus.MARKER.encode() in data, name
        assert b"-----BEGIN RSA PRIVATE KEY-----" in data and b"<redacted:secret>" in data, name
    assert entries[f"{trial}/stdout.log"]["binary"] is True
    assert entries[f"{trial}/trace.log.gz"]["compressed"] == "gzip"
    json.loads(members[f"ticket/{trial}/probe_result.json"])  # still JSON


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_review_names_the_rule_of_every_finding(corpus_run, tmp_path):
    proc = _run_clean(["bundle", str(corpus_run), "--review", "--json"], tmp_path, _bundle_env())
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["redactions"]
    by_file: dict[str, set[str]] = {}
    for r in rows:
        by_file.setdefault(r["file"].rsplit("/", 1)[-1], set()).add(r["rule"])
        assert r["before"].startswith("<") and r["before"].endswith(" chars>"), r
    want = {"detect_secrets.GitHubTokenDetector", "detect_secrets.SlackDetector",
            "secret_keyword", "url_credentials", "private_key", "trial_secret"}
    for name in ("stdout.log", "stderr.log", "aorta_kernel_stats.csv", "trace.log.gz"):
        assert want <= by_file[name], (name, want - by_file[name])
    text = _run_clean(["bundle", str(corpus_run), "--review"], tmp_path, _bundle_env()).stdout
    for value in (v for p in corpus.PLACES for v in corpus.planted(p).values()):
        assert value not in text
    lines = [ln for ln in text.splitlines() if "stdout.log:" in ln]
    assert {ln.split()[0] for ln in lines} >= want


def _run_clean(args: list[str], cwd: Path, env: dict[str, str]):
    import subprocess

    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _views(data: bytes) -> list[bytes]:
    """The bytes and every decoding of them a reader could apply: UTF-16/32, zlib, gzip, zip
    members (recursively, a few levels)."""
    import io
    import zipfile
    import zlib

    out = [data]
    for codec in ("utf-16", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
        out.append(data.decode(codec, "ignore").encode("utf-8", "ignore"))
    for unpack in (zlib.decompress, gzip.decompress):
        with contextlib.suppress(Exception):  # not that format
            out.extend(_views(unpack(data)))
    if b"PK\x03\x04" in data:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for name in z.namelist():
                    out.append(name.encode())
                    out.extend(_views(z.read(name)))
        except zipfile.BadZipFile:
            pass
    return out


def _needles(value: str) -> list[bytes]:
    """A value, its halves and its base64: none may be in an archive."""
    import base64

    out = [value, json.dumps(value)[1:-1]]
    if len(value) >= 16:
        out += [value[: len(value) // 2], value[len(value) // 2:]]
    return [n.encode() for n in out] + [base64.b64encode(value.encode())]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_issue35_forms_names_and_containers_never_reach_the_archive(corpus_run, tmp_path):
    """>= 80 forms: issue 28's and 35's text forms in seven places (a mitigations sidecar's
    variables among them), the command after `--`, an environment variable the trial printed,
    file names, and eight containers; every harmless string of the corpus is kept."""
    values = {f"{place}:{form}": value for place in corpus.PLACES
              for form, value in corpus.planted(place).items()}
    values.update({f"container:{k}": v for k, v in corpus.container_values().items()})
    values.update({f"name:{k}": v for k, v in corpus.name_values().items()})
    values["argv"] = corpus.ARG_SECRET
    values["env_printed"] = corpus.ENV_PRINTED
    forms = {key.split(":", 1)[-1] for key in values}
    assert len(forms) >= 80, len(forms)
    places = {key.split(":", 1)[0] for key in values if not key.startswith("container:")}
    assert "sidecar" in places and len(places) >= 8, places  # + the recipe's command, below
    proc = _run_clean(["bundle", str(corpus_run), "-o", "t.tar.gz", "--json"], tmp_path,
                      _bundle_env())
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(tmp_path / "t.tar.gz") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    members = _members(tmp_path / "x")
    views = [(name, view) for name, data in members.items() for view in _views(data)]
    views += [(name, name.encode()) for name in members]
    leaks = sorted({(key, name) for key, value in values.items() for needle in _needles(value)
                    for name, view in views if needle in view})
    assert leaks == []
    trial = next(n for n in members if n.endswith("trial-000/stdout.log"))
    kept = members[trial]
    lost = [s for s in corpus.HARMLESS if s.encode() not in kept]
    assert lost == []
    files = {f["path"].rsplit("/", 1)[-1]: f for f in json.loads(proc.stdout)["files"]}
    for name, _data in corpus.containers().values():  # scanned, not left out
        assert "skipped" not in files[name], (name, files[name])


RECIPE_COMMAND_SECRETS = {
    "flag_password": "Rc9dPassw0rdQ7zX1",
    "hf_token": "hf_" + "Kq3Lw8Zr5Tn2Vb7Xc4Mj9Hs6Df1Ga0Pe3Yu",
    "query_sig": "Sg7Hk2Lp9Qw4Er6Ty1Ui3Oa8Sd5Fg0Hj2Kl",
}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_secrets_in_the_recipes_command_never_reach_the_archive(tmp_path):
    """The last place of issue 35's ten: the command written in the recipe (`command:`),
    which the sweep records in recipe.resolved.yaml, the plan and the journal."""
    v = RECIPE_COMMAND_SECRETS
    command = [sys.executable, "-c", "print('ok')", "--db-password", v["flag_password"],
               "--hub-token", v["hf_token"], f"https://x.example/a?b=1&sig={v['query_sig']}"]
    (tmp_path / "probe.yaml").write_text(RECIPE.replace("collect:\n  rocprof: {}\n", "")
                                         .replace(corpus.SIDECAR_MITIGATION, "none")
                                         + f"command: {json.dumps(command)}\n")
    proc = aorta("--batch", "probe.yaml", "--no-snapshot", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run_dir(tmp_path / "aorta-out")
    assert v["hf_token"].encode() in (run / "recipe.resolved.yaml").read_bytes()  # planted
    proc = _run_clean(["bundle", str(run), "-o", "t.tar.gz"], tmp_path, _bundle_env())
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(tmp_path / "t.tar.gz") as tar:
        tar.extractall(tmp_path / "x", filter="data")
    members = _members(tmp_path / "x")
    leaks = sorted({(form, name) for form, value in v.items() for needle in _needles(value)
                    for name, data in members.items() for view in _views(data) if needle in view})
    assert leaks == []
