"""`aorta-tui env probe|summary|diff`: files written, exit codes, plain vs TTY output, and no
traceback on bad input. The diff/summary commands run as real processes where exit codes or
TTY behaviour matter."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from envsnap_helpers import FIXTURES, REPO
from typer.testing import CliRunner

from aorta_tui.cli.env_cmd import app

runner = CliRunner()
ENV_CLI = [sys.executable, "-m", "aorta_tui", "env"]


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*ENV_CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_probe_writes_env_json_by_default(tmp_path: Path) -> None:
    proc = run_cli("probe", "--no-torch", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads((tmp_path / "env.json").read_text())
    assert snap["format"] == "aorta-tui-envsnap" and snap["schema_version"] == 1
    assert "wrote env.json" in proc.stderr and "[host]" in proc.stdout


def test_probe_summary_field_and_json_write_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    summary = runner.invoke(app, ["probe", "--summary", "--no-torch"])
    assert summary.exit_code == 0 and "[cuda]" in summary.stdout and "[rocm]" in summary.stdout
    field = runner.invoke(app, ["probe", "--field", "host.kernel_release", "--no-torch"])
    assert field.exit_code == 0 and json.loads(field.stdout) == os.uname().release
    cores = runner.invoke(app, ["probe", "--field", "host.cpu_logical_cores", "--no-torch"])
    assert json.loads(cores.stdout) == os.cpu_count()  # JSON-typed: a number, not a string
    whole = runner.invoke(app, ["probe", "--json", "--no-torch"])
    assert json.loads(whole.stdout)["format"] == "aorta-tui-envsnap"
    assert not Path("env.json").exists()


def test_probe_bad_field_lists_nearest_keys_and_exits_2() -> None:
    result = runner.invoke(app, ["probe", "--field", "torch.vers", "--no-torch"])
    assert result.exit_code == 2
    assert "no key 'vers' under torch" in result.stderr and "nearest keys: version" in result.stderr


def test_probe_refuses_two_output_modes_and_a_directory(tmp_path: Path) -> None:
    both = runner.invoke(app, ["probe", "--summary", "--json", "--no-torch"])
    assert both.exit_code == 2 and "use one" in both.stderr
    into_dir = runner.invoke(app, ["probe", "-o", str(tmp_path), "--no-torch"])
    assert into_dir.exit_code == 2 and "is a directory" in into_dir.stderr


def test_diff_exit_codes_and_json() -> None:
    cpu, h200 = str(FIXTURES / "cpu-box.json"), str(FIXTURES / "h200.json")
    different = run_cli("diff", cpu, h200)
    assert different.returncode == 1, different.stderr
    assert "[cuda]" in different.stdout and "cuda.cublas.version" in different.stdout
    same = run_cli("diff", h200, h200)
    assert same.returncode == 0 and same.stdout.startswith("no differences in")
    as_json = run_cli("diff", cpu, h200, "--json", "--section", "cuda")
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and data["has_relevant_differences"] is True
    assert {e["section"] for e in data["entries"]} == {"cuda"}
    assert any(e["path"] == "cuda.cublas.version" and e["rank"] == "numerics" for e in data["entries"])


def test_diff_all_shows_volatile_fields() -> None:
    cpu, h200 = str(FIXTURES / "cpu-box.json"), str(FIXTURES / "h200.json")
    hidden = json.loads(run_cli("diff", cpu, h200, "--json").stdout)
    shown = json.loads(run_cli("diff", cpu, h200, "--json", "--all").stdout)
    assert hidden["hidden_volatile"] > 0 and shown["hidden_volatile"] == 0
    assert len(shown["entries"]) == len(hidden["entries"]) + hidden["hidden_volatile"]


def test_diff_unknown_section_and_bad_files_exit_2(tmp_path: Path) -> None:
    h200 = str(FIXTURES / "h200.json")
    section = run_cli("diff", h200, h200, "--section", "gpu")
    assert section.returncode == 2 and "sections:" in section.stderr and "gpus" in section.stderr
    truncated = tmp_path / "cut.json"
    truncated.write_text((FIXTURES / "h200.json").read_text()[:500])
    for bad in (str(truncated), str(tmp_path)):
        proc = run_cli("diff", bad, h200)
        assert proc.returncode == 2
        assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr + proc.stdout


def test_summary_of_files_both_kinds() -> None:
    ours = runner.invoke(app, ["summary", str(FIXTURES / "h200.json")])
    assert ours.exit_code == 0
    assert "NVIDIA H200 sm_90, 132 SMs" in ours.stdout and "580.159.04" in ours.stdout
    assert "13.1.0 / 13.1.0" in ours.stdout  # cuBLAS / cuBLASLt
    upstream = runner.invoke(app, ["summary", str(FIXTURES / "upstream-h200.json")])
    assert upstream.exit_code == 0 and "torch.version" in upstream.stdout and "2.11.0+cu130" in upstream.stdout
    cpu = runner.invoke(app, ["summary", str(FIXTURES / "cpu-box.json")])
    assert "2.13.0+cpu (CPU-only build)" in cpu.stdout and "not available (no GPU driver found" in cpu.stdout
    up_field = runner.invoke(app, ["summary", str(FIXTURES / "upstream-h200.json"), "--field", "pytorch_version"])
    assert json.loads(up_field.stdout) == "2.11.0+cu130"
    up_wrong = runner.invoke(app, ["summary", str(FIXTURES / "upstream-h200.json"), "--field", "pytorch_versio"])
    assert up_wrong.exit_code == 2 and "nearest keys: pytorch_version" in up_wrong.stderr
    field = runner.invoke(app, ["summary", str(FIXTURES / "h200.json"), "--field", "gpus.0.architecture"])
    assert field.stdout.strip() == '"sm_90"'


def _run_in_pty(argv: list[str]) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def test_diff_on_a_terminal_draws_rich_tables() -> None:
    code, text = _run_in_pty([*ENV_CLI, "diff", str(FIXTURES / "cpu-box.json"), str(FIXTURES / "h200.json")])
    assert code == 1
    assert "cuda.cublas.version" in text and ("┃" in text or "│" in text)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_engine_imports_no_torch_rich_or_textual() -> None:
    code = ("import sys, aorta_tui.envsnap as e, aorta_tui.cli.env_cmd; "
            "e.diff_snapshots(e.load_snapshot(sys.argv[1]), e.load_snapshot(sys.argv[2])); "
            "e.capture_snapshot(include_torch=True); "
            "print(sorted(m for m in ('torch', 'rich', 'textual') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "cpu-box.json"), str(FIXTURES / "h200.json")],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.stdout.strip() == "[]", proc.stderr


@pytest.mark.parametrize("command", ["probe", "diff", "summary"])
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "Example" in result.stdout
