"""`aorta-tui bundle` through the real CLI, on a real probe sweep that planted secrets.

The sweep's cell sets secrets (a mitigation sidecar's env: the probe mode's way to give a cell
variables), the trial prints them (next to their name and on their own), probe.env holds them,
the orchestrator's environment puts a scrub_env_keys variable and a home path into the env
snapshots. The archive is extracted and grepped: none survives; every other file is
byte-identical; the manifest says what changed and by which rule.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from aorta_tui.core.secrets import SECRET_HASHES_FILE
from tests.engine_support import aorta, only_run_dir

HF_TOKEN = "hf_PLANTEDtok3nValue42"
API_KEY = "wandbPLANTEDkey9911"
HCA = "mlx5_PLANTEDhca7"
HOME_USER = "alicePLANTED"
PLANTED = (HF_TOKEN, API_KEY, HCA, HOME_USER)

RECIPE = """\
schema_version: 1
mode: probe
ticket: T-BUNDLE
trials: 1
timeout_per_trial: 30
mitigation_axis: [none, planted]
diagnostic_axis: [none]
env_passthrough_mode: file
collect_paths: ["{collect}"]
redaction:
  scrub_env_keys: ["NCCL_*"]
  scrub_paths: false
  scrub_ip_addresses: true
"""
# prints the token next to its name, on its own, a scrub_env_keys variable, an address, a
# home path, and enough lines for --max-log-bytes to cut
SCRIPT = ('echo "HF_TOKEN=$HF_TOKEN"; echo "the token is $HF_TOKEN, key $WANDB_API_KEY"; '
          'echo "NCCL_IB_HCA=$NCCL_IB_HCA via 10.20.30.40"; echo "cache in $CUDA_HOME/bin"; '
          'cat "$AORTA_ENV_FILE" >&2; seq 1 20000; echo "last line"')


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("bundle-run")
    # a file collected from a home directory: its path in the archive names the user
    notes = base / "home" / HOME_USER / "notes.txt"
    notes.parent.mkdir(parents=True)
    notes.write_text("plain notes\n")
    (base / "probe.yaml").write_text(RECIPE.replace("{collect}", str(notes)))
    (base / "mits.json").write_text(json.dumps({"planted": {
        "env": {"HF_TOKEN": HF_TOKEN, "WANDB_API_KEY": API_KEY},
        "description": "plants secrets"}}))
    proc = aorta("--batch", "probe.yaml", "--mitigations-file", "mits.json", "--output", "out",
                 "--", "sh", "-c", SCRIPT, cwd=base,
                 env={"NCCL_IB_HCA": HCA, "CUDA_HOME": f"/home/{HOME_USER}/cuda-12"})
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(base / "out")
    # the secrets really are in the run directory, or this test proves nothing
    everything = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())
    for value in PLANTED:
        assert value.encode() in everything, value
    assert b"10.20.30.40" in everything
    return run


def _extract(archive: Path, dest: Path) -> Path:
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            assert m.uname == "" and m.uid == 0  # the owner's name would leak too
        tar.extractall(dest, filter="data")
    (root,) = list(dest.iterdir())
    return root


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_no_planted_secret_survives_and_the_rest_is_identical(run_dir, tmp_path):
    proc = aorta("bundle", str(run_dir), "-o", "ticket.tar.gz", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    root = _extract(tmp_path / "ticket.tar.gz", tmp_path / "x")
    assert root.name == "ticket"
    assert json.loads((root / "MANIFEST.json").read_text()) == manifest
    for p in root.rglob("*"):
        assert HOME_USER not in str(p)
        if p.is_file():
            data = p.read_bytes()
            for value in (*PLANTED, "10.20.30.40"):
                assert value.encode() not in data, (value, p)
    entries = {f["path"]: f for f in manifest["files"]}
    # the keyed hashes of the trials' secrets are read, never bundled
    assert "never bundled" in entries.pop(f"{run_dir.name}/secret-hashes.json")["skipped"]
    assert not (root / run_dir.name / "secret-hashes.json").exists()
    sources = {p.relative_to(run_dir).as_posix(): p for p in run_dir.rglob("*") if p.is_file()
               and p.name != "secret-hashes.json"}
    collected = [rel for rel in sources if HOME_USER in rel]
    assert len(collected) == 2  # the path of each trial's collected file names the user ...
    renamed = {rel: rel.replace(f"/home/{HOME_USER}/", "/home/<user>/") for rel in sources}
    assert set(entries) == {f"{run_dir.name}/{renamed[rel]}" for rel in sources}
    for rel in collected:  # ... not in the archive
        assert entries[f"{run_dir.name}/{renamed[rel]}"]["renamed"] is True
    for rel, src in sources.items():
        entry = entries[f"{run_dir.name}/{renamed[rel]}"]
        out = (root / run_dir.name / renamed[rel]).read_bytes()
        original = src.read_bytes()
        assert entry["sha256"] == _sha(out) and entry["size"] == len(out)
        assert entry["source_sha256"] == _sha(original)
        planted = any(v.encode() in original for v in (*PLANTED, "10.20.30.40"))
        if planted:
            assert entry["redacted"] and not entry["identical"], rel
            assert entry["redactions"], rel
        else:
            assert out == original, rel
            assert entry["identical"] and not entry["redacted"], rel
        if rel.endswith(".json"):
            json.loads(out)  # redaction keeps JSON valid
    log = entries[f"{run_dir.name}/trials/planted-none/trial-000/stdout.log"]
    assert {r["rule"] for r in log["redactions"]} >= {"secret_env", "secret_value",
                                                       "scrub_env_keys", "scrub_ip_addresses",
                                                       "home_user"}
    snap = [e for p, e in entries.items() if "/env/" in p and e["redacted"]]
    assert snap and all({r["rule"] for r in e["redactions"]} >= {"scrub_env_keys", "home_user"}
                        for e in snap)
    text = (root / run_dir.name / "trials/planted-none/trial-000/stdout.log").read_text()
    assert "HF_TOKEN=<redacted:secret>" in text and "/home/<user>/cuda-12/bin" in text
    run_json = json.loads((run_dir / "run.json").read_text())
    assert manifest["inputs"][0]["recipe_hash"] == run_json["recipe_hash"]
    assert manifest["tool_version"] and manifest["kind"] == "aorta-tui/bundle"
    assert manifest["totals"]["redactions"]["secret_env"] >= 4


def _bundled_files(run_dir: Path) -> int:
    """The files a bundle of ``run_dir`` reads: every regular file but the keyed hashes of its
    secrets, which never leave the run."""
    return sum(1 for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()
               and p.name != SECRET_HASHES_FILE)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_review_shows_rules_masks_values_and_writes_nothing(run_dir, tmp_path):
    before = sorted(os.listdir(tmp_path))
    run_before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    proc = aorta("bundle", str(run_dir), "--review", "-o", "t.tar.gz", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == before
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")} == run_before
    for value in PLANTED:
        assert value not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("secret_env") and "stdout.log:1:" in ln
               and "-> <redacted:secret>" in ln for ln in lines), proc.stdout
    assert any(ln.startswith("scrub_ip_addresses") and "10.20.30.40 -> <IPV4:0>" in ln
               for ln in lines)
    assert any(ln.startswith("home_user") for ln in lines)
    assert "nothing written" in lines[-1]
    # "N redactions in M of S files scanned": a clean review still says how much it read
    files = _bundled_files(run_dir)
    redacted = len({ln.split()[1].split(":")[0] for ln in lines if ln.startswith("secret_env")})
    assert redacted >= 1 and f" of {files} files scanned" in lines[-1], (files, lines[-1])
    rows = json.loads(aorta("bundle", str(run_dir), "--review", "--json", cwd=tmp_path).stdout)
    assert all(r["before"].startswith("<") for r in rows["redactions"]
               if r["rule"] in ("secret_env", "secret_value", "scrub_env_keys"))
    assert rows["scanned_files"] == files


def test_max_log_bytes_keeps_head_and_tail(run_dir, tmp_path):
    proc = aorta("bundle", str(run_dir), "-o", "t.tar.gz", "--max-log-bytes", "4096", "--json",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    root = _extract(tmp_path / "t.tar.gz", tmp_path / "x")
    rel = f"{run_dir.name}/trials/planted-none/trial-000/stdout.log"
    out = (root / rel).read_text()
    assert len(out) < 4096 + 200
    assert out.startswith("HF_TOKEN=<redacted:secret>\n")
    assert out.endswith("20000\nlast line\n")
    assert "bytes cut from the middle of this log (--max-log-bytes 4096)]" in out
    entry = next(f for f in manifest["files"] if f["path"] == rel)
    assert entry["truncated"]["cut_bytes"] > 100_000
    assert HF_TOKEN not in out


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_redaction_file_and_hostnames(run_dir, tmp_path):
    (tmp_path / "scrub.yaml").write_text("scrub_paths: true\nscrub_env_keys: [CUDA_*]\n")
    proc = aorta("bundle", str(run_dir), str(run_dir), "-o", "t.tar.gz", "--hostnames",
                 "--redaction-from", "scrub.yaml", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    assert [i["name"] for i in manifest["inputs"]] == [run_dir.name, f"{run_dir.name}-2"]
    # how many host names were hidden (this one, at least, short and long): it said 0
    assert all(i["redaction"]["hostnames"] >= 1 for i in manifest["inputs"]), manifest["inputs"]
    root = _extract(tmp_path / "t.tar.gz", tmp_path / "x")
    lock = (root / run_dir.name / ".lock").read_text()
    assert socket.gethostname() not in lock and "<HOST:0>" in lock
    log = (root / run_dir.name / "trials/planted-none/trial-000/stdout.log").read_text()
    # CUDA_* (the file's glob) hides CUDA_HOME's value wherever it was printed
    assert "cache in <redacted:scrub_env_keys>/bin" in log and "cuda-12" not in log
    argv0 = json.loads((run_dir / "run.json").read_text())["argv"][0]  # an absolute path
    assert argv0.startswith("/")
    run_json = json.loads((root / run_dir.name / "run.json").read_text())
    assert run_json["argv"][0] == "<PATH:0>"


@pytest.mark.parametrize("case", ["missing", "not_a_run", "no_parent", "output_is_dir",
                                  "bad_file", "unwritable", "small_max"])
def test_bad_input_is_a_located_error_and_writes_nothing(run_dir, tmp_path, case):
    (tmp_path / "plain").mkdir()
    args = {
        "missing": ["nope/run", "-o", "t.tar.gz"],
        "not_a_run": ["plain", "-o", "t.tar.gz"],
        "no_parent": [str(run_dir), "-o", "no/such/t.tar.gz"],
        "output_is_dir": [str(run_dir), "-o", "plain"],
        "bad_file": [str(run_dir), "-o", "t.tar.gz", "--redaction-from", "bad.yaml"],
        "unwritable": [str(run_dir), "-o", "/proc/t.tar.gz"],
        "small_max": [str(run_dir), "-o", "t.tar.gz", "--max-log-bytes", "5"],
    }[case]
    (tmp_path / "bad.yaml").write_text("scrub_env_keys: [A_*]\nscrub_paths: maybe\n")
    proc = aorta("bundle", *args, cwd=tmp_path)
    want = {"unwritable": 3}.get(case, 2)
    assert proc.returncode == want, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr
    assert not (tmp_path / "t.tar.gz").exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.yaml", "plain"]
    if case == "bad_file":
        assert "bad.yaml:2:" in proc.stderr and "scrub_paths" in proc.stderr
    if case == "missing":
        assert "nope/run" in proc.stderr and "fix:" in proc.stderr


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_policy_sweep_and_a_queue_result_in_one_bundle(tmp_path):
    q = aorta("queue", "run", "hetero_kernels", "--streams", "2", "--iterations", "3",
              "--warmup", "1", "--device", "cpu", "--size", "tiny", "-o", "q.json", cwd=tmp_path)
    assert q.returncode == 0, q.stderr
    pol = aorta("policy", "sweep", "hetero_kernels", "--policies", "baseline", "--trials", "1",
                "--streams", "2", "--iterations", "3", "--warmup", "1", "--device", "cpu",
                "--size", "tiny", "-o", "pol", cwd=tmp_path)
    assert pol.returncode == 0, pol.stderr
    proc = aorta("bundle", "pol", "q.json", "-o", "b.tar.gz", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    assert [(i["name"], i["kind"]) for i in manifest["inputs"]] == [
        ("pol", "policy-sweep"), ("q.json", "queue-result")]
    paths = {f["path"] for f in manifest["files"]}
    assert "q.json" in paths and "pol/sweep.json" in paths and "pol/policy.json" in paths
    root = _extract(tmp_path / "b.tar.gz", tmp_path / "x")
    assert json.loads((root / "q.json").read_text())["kind"] == "aorta-tui/queue-result"
    # a JSON file that is not a queue result is refused
    (tmp_path / "other.json").write_text('{"kind": "something"}')
    bad = aorta("bundle", "other.json", cwd=tmp_path)
    assert bad.returncode == 2 and "other.json" in bad.stderr and "queue result" in bad.stderr


def test_the_bundle_engine_imports_no_front_end():
    import subprocess
    import sys

    code = ("import sys, aorta_tui.bundle.archive, aorta_tui.bundle.redact; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_binary_files_are_scanned_and_what_cannot_be_is_left_out(run_dir, tmp_path):
    import gzip
    import shutil
    import zipfile

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    blob = b"\x00\x01binary HF_TOKEN=" + HF_TOKEN.encode() + b"\x00 and " + API_KEY.encode()
    (copy / "core.bin").write_bytes(blob)
    (copy / "plain.bin").write_bytes(b"\x00\x01\x02 nothing secret \xff\x00")
    (copy / "passwd").symlink_to("/etc/passwd")
    os.mkfifo(copy / "pipe")
    with zipfile.ZipFile(copy / "model.pt", "w") as z:  # torch.save writes a zip
        z.writestr("data.pkl", f"HF_TOKEN={HF_TOKEN}")
    (copy / "cut.gz").write_bytes(gzip.compress(f"HF_TOKEN={HF_TOKEN}\n".encode())[:-12])
    (copy / "nested.gz").write_bytes(gzip.compress(gzip.compress(f"t {HF_TOKEN}\n".encode())))
    outside = tmp_path / "outside-secret.txt"  # a file of no run, hard-linked into it
    outside.write_text(f"HF_TOKEN={HF_TOKEN}\nsomeone else's file\n")
    os.link(outside, copy / "linked.txt")
    other = copy / "other-user.txt"
    other.write_text("written by another user\n")
    trust: tuple[str, ...] = ()
    if os.geteuid() == 0:
        os.chown(other, 65534, 65534)
        # root without sudo refuses a run holding another user's file (test_bundle_untrusted):
        # trusted here, the file-level rule still leaves that file out
        trust = ("--i-trust-this-directory",)
    proc = aorta("bundle", str(copy), "-o", "t.tar.gz", "--json", *trust, cwd=tmp_path,
                 timeout=60)
    assert proc.returncode == 0, proc.stderr
    entries = {f["path"]: f for f in json.loads(proc.stdout)["files"]}
    core = entries["run/core.bin"]  # a NUL byte: scanned as bytes, redacted
    assert core["binary"] and core["redacted"] and not core["identical"]
    assert core["note"] == "binary (a NUL byte): scanned as bytes"
    assert entries["run/plain.bin"]["identical"] and not entries["run/plain.bin"]["redacted"]
    assert entries["run/nested.gz"]["compressed"] == "gzip" and entries["run/nested.gz"]["redacted"]
    assert "symlink" in entries["run/passwd"]["skipped"]
    assert entries["run/pipe"]["skipped"] == "not a regular file"
    # a zip (torch.save writes one) is opened: its members scanned, written back redacted
    assert entries["run/model.pt"]["compressed"] == "zip" and entries["run/model.pt"]["redacted"]
    assert "gzip data that is cut short" in entries["run/cut.gz"]["skipped"]
    assert "a hard link (2 names" in entries["run/linked.txt"]["skipped"]
    if os.geteuid() == 0:
        assert "owned by uid 65534" in entries["run/other-user.txt"]["skipped"]
    root = _extract(tmp_path / "t.tar.gz", tmp_path / "x")
    out = (root / "run" / "core.bin").read_bytes()
    assert HF_TOKEN.encode() not in out and API_KEY.encode() not in out
    assert out.startswith(b"\x00\x01binary HF_TOKEN=<redacted:secret>\x00")
    assert HF_TOKEN.encode() not in gzip.decompress(gzip.decompress(
        (root / "run" / "nested.gz").read_bytes()))
    for name in ("passwd", "pipe", "cut.gz", "linked.txt"):
        assert not (root / "run" / name).exists(), name
    with zipfile.ZipFile(root / "run" / "model.pt") as z:
        assert z.read("data.pkl") == b"HF_TOKEN=<redacted:secret>"
    review = aorta("bundle", str(copy), "--review", *trust, cwd=tmp_path, timeout=60).stdout
    assert "run/core.bin: binary (a NUL byte): scanned as bytes" in review
    assert "run/linked.txt: left out: a hard link" in review


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/etc/shadow"),
                    reason="a hard link to /etc/shadow needs root")
def test_a_hard_link_to_etc_shadow_is_left_out(run_dir, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    try:
        os.link("/etc/shadow", copy / "shadow")
    except OSError as exc:  # /etc on another filesystem than the temp directory
        pytest.skip(f"cannot hard-link /etc/shadow here: {exc}")
    try:
        proc = aorta("bundle", str(copy), "-o", "t.tar.gz", "--json", cwd=tmp_path, timeout=60)
    finally:
        os.unlink(copy / "shadow")
    assert proc.returncode == 0, proc.stderr
    entry = next(f for f in json.loads(proc.stdout)["files"] if f["path"] == "run/shadow")
    assert "hard link" in entry["skipped"] and "sha256" not in entry
    with tarfile.open(tmp_path / "t.tar.gz") as tar:
        assert not [m for m in tar.getnames() if m.endswith("/shadow")]


def test_a_write_that_fails_midway_leaves_nothing(run_dir, tmp_path):
    # a file size limit makes the archive's write fail (EFBIG) after some bytes were written
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000)); "
            f"sys.argv = ['aorta-tui', 'bundle', {str(run_dir)!r}, '-o', 't.tar.gz']; "
            "from aorta_tui.cli.main import run; run()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "cannot write the bundle" in proc.stderr and "nothing was written" in proc.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_run_that_is_still_running_is_bundled_with_a_warning(run_dir, tmp_path):
    import fcntl
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    with open(copy / ".lock") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # as the orchestrator holds it
        proc = aorta("bundle", str(copy), "-o", "t.tar.gz", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "is still running" in proc.stderr
    assert json.loads(proc.stdout)["inputs"][0]["running"] is True


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Path:
    """A real run whose bundle takes a few seconds: two trials' logs of ~7 MB each."""
    base = tmp_path_factory.mktemp("big-run")
    (base / "probe.yaml").write_text(RECIPE.replace("collect_paths: [\"{collect}\"]\n", "")
                                     .replace("[none, planted]", "[none]")
                                     .replace("trials: 1", "trials: 2"))
    proc = aorta("--batch", "probe.yaml", "--output", "out", "--no-snapshot", "--", "sh", "-c",
                 f'echo "HF_TOKEN={HF_TOKEN}"; seq 1 1000000', cwd=base, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return only_run_dir(base / "out")


def _wait_for(cond, what: str, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)  # polling a condition, not a fixed wait


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
@pytest.mark.parametrize("point", ["reading", "writing"])
def test_an_interrupted_bundle_leaves_nothing_behind(big_run, tmp_path, sig, point):
    import signal

    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "bundle", str(big_run), "-o",
                             "t.tar.gz"], cwd=out, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def temp_files() -> list[Path]:
        return [p for p in out.iterdir() if p.name != "t.tar.gz"]

    # reading: the first pass, the temp file just made; writing: archive bytes already in it
    if point == "reading":
        _wait_for(lambda: temp_files() or proc.poll() is not None, "the temp file")
    else:
        _wait_for(lambda: any(p.stat().st_size > 0 for p in temp_files())
                  or proc.poll() is not None, "archive bytes")
    assert proc.poll() is None, "the bundle ended before it could be interrupted"
    proc.send_signal(getattr(signal, sig))
    _stdout, stderr = proc.communicate(timeout=60)
    if sig == "SIGINT":
        assert proc.returncode == 130, stderr
        assert "interrupted" in stderr and "Traceback" not in stderr
    else:
        assert proc.returncode == -signal.SIGKILL
    _wait_for(lambda: not list(out.iterdir()), "the temp file to be removed", timeout=10)
    assert not (big_run / "t.tar.gz").exists()


@pytest.mark.parametrize("code", [
    "import sys\nsys.argv = ['aorta-tui', '--help']\nfrom aorta_tui.cli import main\n"
    "try:\n    main.run()\nexcept SystemExit:\n    pass",
    "import sys\nsys.argv = ['aorta-tui', 'bundle', '--help']\nfrom aorta_tui.cli import main\n"
    "try:\n    main.run()\nexcept SystemExit:\n    pass",
    "import asyncio\nfrom aorta_tui.tui.app import AortaApp\n"
    "async def first_frame():\n    async with AortaApp().run_test(size=(80, 24)) as pilot:\n"
    "        await pilot.pause()\nasyncio.run(first_frame())",
], ids=["help", "bundle-help", "tui-first-frame"])
def test_the_scanner_is_imported_only_when_a_bundle_is_made(code):
    # detect-secrets costs 0.15-0.5 s to import on the 2-core box (requests, every plugin)
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('SCANNER', sorted("
                          "m for m in sys.modules if m.split('.')[0] in ('detect_secrets', "
                          "'requests')))"], capture_output=True, text=True, timeout=60)
    assert "SCANNER []" in out.stdout, out.stdout[-500:] + out.stderr[-2000:]
