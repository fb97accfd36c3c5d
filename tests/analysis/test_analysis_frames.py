"""Results as DataFrames, and `aorta-tui export`, on run directories the real CLI produced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_support import aorta, probe_run

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

pd = pytest.importorskip("pandas")

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return probe_run(tmp_path_factory.mktemp("analysis-run"))


def test_a_run_as_frames(run_dir):
    from aorta_tui.analysis import load, load_run

    frames = load_run(run_dir)
    assert set(frames) == {"trials", "cells", "steps"}
    assert load(run_dir)["trials"].equals(frames["trials"])
    trials = frames["trials"].set_index("trial_id")
    for p in run_dir.glob("trials/*/trial-*/result.json"):
        r = json.loads(p.read_text())
        row = trials.loc[r["trial_id"]]
        assert row["verdict"] == r["verdict"] and row["cell"] == r["cell"]
        assert row["exit_code"] == r["process"]["exit_code"]
    assert len(trials) == 4
    assert set(trials.loc[trials["cell"] == "gpu_max_hw_queues_2-none", "verdict"]) == {"fail"}
    assert trials["order"].tolist() == sorted(trials["order"].tolist())
    steps = frames["steps"]
    assert len(steps) == 12
    assert steps.groupby("trial_id")["step_time_s"].apply(list).map(tuple).unique().tolist() == [
        (0.25, 0.5, 1.25)]
    assert trials["step_time_p50_s"].tolist() == [0.5] * 4
    matrix = {c["cell"]: c for c in json.loads((run_dir / "matrix.json").read_text())["cells"]}
    cells = frames["cells"].set_index("cell")
    for name, c in matrix.items():
        assert cells.loc[name, "failure_rate"] == c["failure_rate"]
        assert cells.loc[name, "step_time_p50_s"] == c["step_time_s"]["p50"]
    assert cells.loc["gpu_max_hw_queues_2-none", "mitigations"] == "gpu_max_hw_queues_2"


def test_export_csv_reads_back_as_the_frames(run_dir, tmp_path):
    from aorta_tui.analysis import load_run

    proc = aorta("export", str(run_dir), "--format", "csv", "-o", "tables", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)["files"]
    assert sorted(Path(f["path"]).name for f in written) == ["cells.csv", "steps.csv", "trials.csv"]
    frames = load_run(run_dir)
    for name in ("trials", "cells", "steps"):
        back = pd.read_csv(tmp_path / "tables" / f"{name}.csv", keep_default_na=False,
                           na_values=[""])
        assert list(back.columns) == list(frames[name].columns)
        assert len(back) == len(frames[name])
    steps = pd.read_csv(tmp_path / "tables" / "steps.csv")
    assert steps["step_time_s"].sum() == pytest.approx(4 * 2.0)
    # the default directory is named after the run
    proc = aorta("export", str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / f"{run_dir.name}-export" / "trials.csv").is_file()


def test_parquet_round_trips_every_table(run_dir, tmp_path):
    pytest.importorskip("pyarrow")  # in the test extra: CI has it
    from aorta_tui.analysis import load_run

    proc = aorta("export", str(run_dir), "--format", "parquet", "-o", "pq", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    frames = load_run(run_dir)
    for name in ("trials", "cells", "steps"):
        back = pd.read_parquet(tmp_path / "pq" / f"{name}.parquet")
        # parquet keeps dtypes, so the frame comes back equal, not only the same length
        pd.testing.assert_frame_equal(back, frames[name], check_dtype=True)


def test_parquet_without_pyarrow_is_exit_3_and_writes_nothing(run_dir, tmp_path):
    # a pyarrow that cannot be imported, ahead of the real one on the path
    shadow = tmp_path / "shadow" / "pyarrow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named pyarrow (shadowed)')\n")
    proc = aorta("export", str(run_dir), "--format", "parquet", "-o", "pq", cwd=tmp_path,
                 env={"PYTHONPATH": str(shadow.parent)})
    assert proc.returncode == 3, proc.stderr
    assert "pyarrow" in proc.stderr and "--format csv" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "pq").exists()


def test_policy_sweep_and_queue_result_as_frames(tmp_path):
    from aorta_tui.analysis import load

    q = aorta("queue", "run", "hetero_kernels", "--streams", "2", "--iterations", "3",
              "--warmup", "1", "--device", "cpu", "--size", "tiny", "-o", "q.json", cwd=tmp_path)
    assert q.returncode == 0, q.stderr
    pol = aorta("policy", "sweep", "hetero_kernels", "--policies", "baseline", "--trials", "2",
                "--streams", "2", "--iterations", "3", "--warmup", "1", "--device", "cpu",
                "--size", "tiny", "-o", "pol", cwd=tmp_path)
    assert pol.returncode == 0, pol.stderr
    queue = load(tmp_path / "q.json")
    doc = json.loads((tmp_path / "q.json").read_text())
    assert queue["points"]["throughput"].tolist() == [doc["summary"]["throughput"]]
    assert queue["per_stream"]["stream"].tolist() == [0, 1]
    assert queue["iterations"]["latency_ms"].tolist() == doc["samples"]["iteration_latency_ms"]
    policy = load(tmp_path / "pol")
    assert policy["trials"]["policy"].tolist() == ["baseline", "baseline"]
    assert set(policy["trials"]["status"]) == {"ok"}
    report = json.loads((tmp_path / "pol" / "policy.json").read_text())
    median = report["policies"][0]["metrics"]["throughput"]["median"]
    assert policy["policies"].loc[0, "throughput_median"] == median
    assert len(policy["per_stream"]) == 2 * 2  # two trials, two streams each
    assert set(policy["per_stream"]["stream"]) == {0, 1}
    proc = aorta("export", "q.json", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "q-export" / "per_stream.csv").is_file()


def _without_pandas(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a process where ``import pandas`` fails, as on a fresh install."""
    code = (f"import sys; sys.modules['pandas'] = None; sys.argv = {['aorta-tui', *argv]!r}; "
            "from aorta_tui.cli.main import run; run()")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_csv_needs_no_pandas_and_writes_what_it_writes_with_pandas(run_dir, tmp_path):
    """The quickstart's next step on a fresh install: the same bytes as with the extra."""
    bare = _without_pandas(["export", str(run_dir), "-o", "bare"], tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert aorta("export", str(run_dir), "-o", "full", cwd=tmp_path).returncode == 0
    names = sorted(p.name for p in (tmp_path / "bare").iterdir())
    assert names == ["cells.csv", "steps.csv", "trials.csv"]
    for name in names:
        assert (tmp_path / "bare" / name).read_bytes() == (tmp_path / "full" / name).read_bytes()


def test_without_pandas_parquet_and_the_frames_name_the_extra(run_dir, tmp_path):
    proc = _without_pandas(["export", str(run_dir), "--format", "parquet", "-o", "x"], tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "pandas is not installed" in proc.stderr and "aorta-tui[analysis]" in proc.stderr
    assert not (tmp_path / "x").exists()
    code = ("import sys; sys.modules['pandas'] = None\nfrom aorta_tui.core.errors import AortaError\n"
            f"from aorta_tui.analysis import load\ntry: load({str(run_dir)!r})\n"
            "except AortaError as e: print(e.exit_code, e.hint)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split(None, 1) == ["3", "pip install 'aorta-tui[analysis]' (or: pip "
                                         "install 'pandas>=2')\n"], out.stderr


def test_importing_analysis_does_not_import_pandas():
    code = "import sys, aorta_tui.analysis; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("args, needle", [
    (["nope"], "no such file"),
    (["plain"], "not a run directory"),
    (["RUN", "--format", "xlsx"], "expected one of csv, parquet"),
    (["RUN", "-o", "no/such/dir"], "does not exist"),
])
def test_bad_input_is_exit_2(run_dir, tmp_path, args, needle):
    (tmp_path / "plain").mkdir()
    args = [str(run_dir) if a == "RUN" else a for a in args]
    proc = aorta("export", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


def test_a_run_without_its_matrix_gets_cells_from_its_trials(run_dir, tmp_path):
    import shutil

    from aorta_tui.analysis import load_run

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "matrix.json").unlink()  # a run killed before its report
    cells = load_run(copy)["cells"].set_index("cell")
    want = load_run(run_dir)["cells"].set_index("cell")
    for column in ("trials", "failed", "failure_rate", "error_rate", "step_count",
                   "step_time_p50_s"):
        assert cells[column].tolist() == want.loc[cells.index, column].tolist(), column


def test_a_trial_whose_result_is_damaged_is_said_to_be_left_out(run_dir, tmp_path):
    # It was dropped from trials.csv without a word while matrix.json still counted it.
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (damaged,) = sorted(copy.glob("trials/*/trial-000/result.json"))[:1]
    damaged.write_text('{"trial_id": ')  # cut short
    trial_id = f"{damaged.parent.parent.name}/trial-000"
    proc = aorta("export", str(copy), "-o", "t", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 trial(s) finished in the journal but have no whole result.json" in proc.stderr
    assert trial_id in proc.stderr
    as_json = aorta("export", str(copy), "-o", "j", "--json", cwd=tmp_path)
    notes = json.loads(as_json.stdout)["notes"]
    assert len(notes) == 1 and trial_id in notes[0]
    rows = pd.read_csv(tmp_path / "t" / "trials.csv")
    assert trial_id not in set(rows["trial_id"])
    # the untouched run has nothing to say
    clean = aorta("export", str(run_dir), "-o", "c", "--json", cwd=tmp_path)
    assert json.loads(clean.stdout)["notes"] == []
