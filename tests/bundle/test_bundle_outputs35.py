"""Issue 35's input and output defects, through the real CLI: an output that is the queue
result it bundles is refused (it once replaced the result, exit 0), and a file name that is
not UTF-8 is archived under a readable name (it once exited 70)."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

from tests.engine_support import aorta


def test_an_output_that_is_its_own_input_is_refused(tmp_path: Path) -> None:
    result = tmp_path / "q.json"
    body = json.dumps({"kind": "aorta-tui/queue-result", "run_id": "r1", "rows": []}) + "\n"
    result.write_text(body)
    proc = aorta("bundle", "q.json", "-o", "q.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "would replace the result it bundles" in proc.stderr
    assert result.read_text() == body
    os.link(result, tmp_path / "alias.json")  # the same file under another name
    proc = aorta("bundle", "q.json", "-o", "alias.json", cwd=tmp_path)
    assert proc.returncode == 2 and result.read_text() == body


def test_a_file_name_that_is_not_utf8_is_archived_escaped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text("")
    with open(os.path.join(os.fsencode(run), b"odd\xff\xfename.log"), "wb") as fh:
        fh.write(b"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789\n")
    proc = aorta("bundle", str(run), "-o", "t.tar.gz", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    paths = [f["path"] for f in json.loads(proc.stdout)["files"]]
    assert "run/odd\\xff\\xfename.log" in paths
    with tarfile.open(tmp_path / "t.tar.gz") as tar:
        member = tar.extractfile("t/run/odd\\xff\\xfename.log")
        assert member is not None and b"hf_abc" not in member.read()


def test_review_puts_secrets_first_and_sums_up_path_rewrites(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text("")
    paths = "\n".join(f"loading /data/shard-{i:04}/part.bin" for i in range(200))
    (run / "a.log").write_text(paths + "\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789\n")
    (tmp_path / "scrub.yaml").write_text("scrub_paths: true\n")
    proc = aorta("bundle", str(run), "--review", "--redaction-from", "scrub.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(("secret_env", "token_format", "secret_value")), lines[:3]
    path_lines = [ln for ln in lines if ln.startswith("scrub_paths")]
    assert path_lines == ["scrub_paths          200 rewrites in 1 files (--json lists each)"]
