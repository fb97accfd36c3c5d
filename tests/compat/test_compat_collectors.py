"""Issue 14, item 5: upstream's ``collect:`` collectors run per trial (collect/collectors.py,
collect/layer_numerics.py), or say "not available: <reason>" in the trial's result.json and in
matrix.md; never a refusal of the whole sweep.

Real parts: sweeps run through the CLI in subprocesses; ``rocprofv3`` and Triton's proton are
fakes that take the real arguments (the same argv upstream builds) and write the real output
formats (rocprofv3's ``*_kernel_stats.csv`` / ``*_kernel_trace.csv``, proton's ``.hatchet``);
layer_numerics runs on CPU torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aorta_tui.collect.summaries import FirstBad, TorchProfilerSummary, load_summary
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.rundir_fs import RunDirFS

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

RECIPE = """\
schema_version: 1
ticket: c14
workload: training
steps: 3
trials: 1
workload_config:
  model: {{vocab_size: 64, hidden_size: 32, num_layers: 1}}
collect:
{collect}
cells:
  - name: base
    mitigations: [none]
"""

FAKE_ROCPROF = """\
#!{python}
# A stand-in for rocprofv3 that parses the real flags, runs the command after `--`, and
# writes rocprofiler-sdk 1.x's CSVs (flat under -d, prefixed by -o) and the -S summary file.
import csv, json, os, subprocess, sys
argv = sys.argv[1:]
sep = argv.index("--")
flags, cmd = argv[:sep], argv[sep + 1:]
d = flags[flags.index("-d") + 1]; o = flags[flags.index("-o") + 1]
assert flags[flags.index("--output-format") + 1] == "csv", flags
stem = flags[flags.index("--summary-output-file") + 1]
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "argv.json"), "w") as fh:
    json.dump(sys.argv, fh)
rc = subprocess.call(cmd)
if "--stats" in flags:
    with open(os.path.join(d, f"{{o}}_kernel_stats.csv"), "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev"])
        w.writerow(["Cijk_Alik_Bljk_SB_MT64x64", "6", "3000000", "500000", "75.0", "400000", "600000", "1.0"])
        w.writerow(["void at::native::vectorized_elementwise_kernel", "4", "1000000", "250000", "25.0", "200000", "300000", "1.0"])
with open(os.path.join(d, f"{{o}}_kernel_trace.csv"), "w", newline="") as fh:
    w = csv.writer(fh, quoting=csv.QUOTE_ALL)
    w.writerow(["Kind", "Agent_Id", "Queue_Id", "Kernel_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp"])
    w.writerow(["KERNEL_DISPATCH", "1", "1", "7", "trace_only_kernel", "1", "100", "2100"])
with open(os.path.join(d, f"{{o}}_{{stem}}.txt"), "w") as fh:
    fh.write("ROCPROFV3 SUMMARY\\n")
sys.exit(rc)
"""

FAKE_PROTON = """\
# A stand-in for `python -m triton.profiler.proton`: its CLI's flags, the script run as
# __main__ with the remaining argv, then the profile written as <-n>.hatchet (a JSON list:
# the frame tree, then device metadata).
import argparse, json, runpy, sys
p = argparse.ArgumentParser()
p.add_argument("-n", "--name"); p.add_argument("-b", "--backend")
p.add_argument("--context"); p.add_argument("--data"); p.add_argument("--mode")
p.add_argument("target", nargs=argparse.REMAINDER)
a = p.parse_args()
sys.argv = a.target
# the fake is no Triton: hide it from the profiled program (torch would take it for one)
for k in [k for k in sys.modules if k == "triton" or k.startswith("triton.")]:
    del sys.modules[k]
sys.path[:] = [x for x in sys.path if not x.endswith("fakepy")]
code = 0
try:
    runpy.run_path(a.target[0], run_name="__main__")
except SystemExit as exc:
    code = exc.code or 0
tree = {"frame": {"name": "ROOT"}, "metrics": {}, "children": [
    {"frame": {"name": "matmul_kernel"}, "metrics": {"time (ns)": 2000000, "count": 3}, "children": []},
    {"frame": {"name": "add_kernel"}, "metrics": {"time (ns)": 500000, "count": 2}, "children": []}]}
with open(a.name + ".hatchet", "w") as fh:
    json.dump([tree, {"device": {}}], fh)
with open(a.name + ".argv.json", "w") as fh:
    json.dump({"context": a.context, "data": a.data, "target": a.target}, fh)
sys.exit(code)
"""


def _sweep(tmp: Path, collect: str, *extra: str, env: dict[str, str] | None = None
           ) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    recipe = tmp / "r.yaml"
    recipe.write_text(RECIPE.format(collect=textwrap.indent(collect, "  ")))
    out = tmp / "out"
    p = subprocess.run([sys.executable, "-m", "aorta_tui", "sweep", "run", "--recipe", str(recipe),
                        "--no-snapshot", "-o", str(out), *extra], capture_output=True, text=True,
                       timeout=240, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    runs = sorted(out.glob("c14/*/"))
    return p, runs[-1] if runs else None


def _no_tools_env(tmp: Path) -> dict[str, str]:
    """PATH with python and the basics but no rocprofv3; no $ROCPROF_BIN."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "ROCPROF_BIN": "", "NCU_BIN": ""}
    return env


def test_missing_profilers_stop_the_run_with_exit_3_before_anything_runs(tmp_path) -> None:
    p, run = _sweep(tmp_path, "layer_numerics: {NANLOG_SAMPLE_EVERY: \"1\"}\nrocprof: {}\nproton: {}\n",
                    env=_no_tools_env(tmp_path))
    assert p.returncode == 3, p.stdout + p.stderr
    assert "rocprof cannot run here: rocprofv3 is not on PATH" in p.stderr
    assert "proton cannot run here: triton.profiler.proton is not importable" in p.stderr
    assert "r.yaml:" in p.stderr and "fix:" in p.stderr and "Traceback" not in p.stderr
    assert run is None  # nothing was created, nothing ran
    # --dry-run plans it and says what a real run would stop on
    dry = _sweep(tmp_path, "rocprof: {}\n", "--dry-run", env=_no_tools_env(tmp_path))[0]
    assert dry.returncode == 0, dry.stderr
    assert "rocprof not available: rocprofv3 is not on PATH" in dry.stdout + dry.stderr


def test_layer_numerics_runs_in_process_and_is_reported(tmp_path) -> None:
    p, run = _sweep(tmp_path, "layer_numerics: {NANLOG_SAMPLE_EVERY: \"1\"}\n",
                    env=_no_tools_env(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    record = json.loads((run / "trials/base/trial-000/result.json").read_text())
    col = record["collectors"]
    assert record["argv"][1:3] == ["-m", "aorta_tui.trial.worker"]  # nothing wrapped
    ln = col["layer_numerics"]
    assert ln["status"] == "ran" and ln["metrics"]["layer_numerics_watched"] == 5
    assert ln["metrics"]["layer_numerics_first_bad"] is None
    trial = run / "trials/base/trial-000/layer_numerics"
    rows = [json.loads(line) for line in (trial / "layers_rank0.jsonl").read_text().splitlines()]
    assert {r["step"] for r in rows} == {0, 1, 2}
    assert {(r["direction"], r["role"]) for r in rows} == {
        ("fwd", "act"), ("fwd", "input"), ("bwd", "igrad"), ("param", "weight"),
        ("param", "bias"), ("param", "wgrad"), ("param", "bgrad")}
    assert {r["layer_name"] for r in rows} >= {"blocks.0.attn.qkv", "head"}
    assert all(r["nan_count"] == 0 and r["finite_count"] == r["numel"] > 0 for r in rows)
    summary = json.loads((trial / "summary_rank0.json").read_text())
    assert summary["steps_seen"] == 3 and summary["records_written"] == len(rows)
    md = (run / "matrix.md").read_text()
    assert "## Collectors" in md and "**layer_numerics**: ran in 1/1 trials" in md
    matrix = json.loads((run / "matrix.json").read_text())
    assert matrix["collectors"]["layer_numerics"]["ran"] == 1


def test_a_fake_rocprofv3_gets_upstreams_argv_and_its_csvs_are_summarised(tmp_path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rocprofv3"
    fake.write_text(FAKE_ROCPROF.format(python=sys.executable))
    fake.chmod(0o755)
    env = {"PATH": f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin", "ROCPROF_BIN": ""}
    p, run = _sweep(tmp_path, "rocprof: {trace: \"kernel,hip\", summary_units: msec}\n", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    trial = run / "trials/base/trial-000"
    record = json.loads((trial / "result.json").read_text())
    argv = record["argv"]
    out = str(trial / "rocprof")
    assert argv[:argv.index("--") + 1] == [
        str(fake), "-d", out, "-o", "aorta", "--output-format", "csv", "--kernel-trace",
        "--hip-trace", "--stats", "-S", "--summary-output-file", "rocprof_summary", "-u", "msec", "--"]
    assert argv[argv.index("--") + 1:][1:3] == ["-m", "aorta_tui.trial.worker"]
    assert record["verdict"] == "pass" and record["workload_result"]["passed"]
    rec = record["collectors"]["rocprof"]
    assert rec["status"] == "ran" and rec["path"] == "rocprof"
    assert rec["metrics"] == {  # the stats CSV wins over the trace (upstream's order)
        "rocprof_kernel_count": 10, "rocprof_gpu_time_ms": 4.0, "rocprof_top_kernel_ms": 3.0,
        "rocprof_top_kernels": ["Cijk_Alik_Bljk_SB_MT64x64",
                                "void at::native::vectorized_elementwise_kernel"]}
    assert (trial / "rocprof/aorta_rocprof_summary.txt").is_file()
    assert "**rocprof**: ran in 1/1 trials" in (run / "matrix.md").read_text()


def test_a_fake_proton_runs_the_trial_worker_by_script_and_its_hatchet_is_summarised(tmp_path) -> None:
    pkg = tmp_path / "fakepy" / "triton" / "profiler" / "proton"
    pkg.mkdir(parents=True)
    for d in (pkg.parent.parent, pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(FAKE_PROTON)
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path / "fakepy"), os.environ.get("PYTHONPATH")]))
    env = {**_no_tools_env(tmp_path), "PYTHONPATH": pythonpath}
    p, run = _sweep(tmp_path, "proton: {context: python}\n", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    trial = run / "trials/base/trial-000"
    record = json.loads((trial / "result.json").read_text())
    argv = record["argv"]
    assert argv[1:9] == ["-m", "triton.profiler.proton", "-n", str(trial / "proton/proton"),
                         "--context", "python", "--data", "tree"]
    assert argv[9].endswith("aorta_tui/trial/worker.py")
    assert record["verdict"] == "pass" and record["workload_result"]["passed"]
    assert record["collectors"]["proton"] == {"status": "ran", "path": "proton", "metrics": {
        "proton_kernel_count": 5, "proton_gpu_time_ms": 2.5, "proton_top_kernel_ms": 2.0,
        "proton_top_kernels": ["matmul_kernel", "add_kernel"]}}


def test_collect_flag_replaces_the_recipes_collectors(tmp_path) -> None:
    p, run = _sweep(tmp_path, "layer_numerics: {}\n", "--collect", "amd_log",
                    env=_no_tools_env(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    col = json.loads((run / "trials/base/trial-000/result.json").read_text())["collectors"]
    assert list(col) == ["amd_log"]
    assert col["amd_log"]["reason"].startswith("not available: upstream AORTA only validates")
    assert not (run / "trials/base/trial-000/layer_numerics").exists()


@pytest.mark.parametrize(("collect", "says"), [
    ("rocprof: {trace: kernl}", "collect.rocprof.trace: unknown domain 'kernl'"),
    ("rocprof: {stat: \"true\"}", "collect.rocprof.stat: unknown rocprof option"),
    ("proton: {backend: cuptii}", "collect.proton.backend: 'cuptii' is not one of"),
    ("proton: {granularity: warp}", "only applies with backend: instrumentation"),
    ("layer_numerics: {NANLOG_SAMPLE_EVERY: \"0\"}", "NANLOG_SAMPLE_EVERY: expected a whole number >= 1"),
    ("layer_numerics: {SAMPLE: \"1\"}", "layer_numerics options are NANLOG_* variables"),
    ("torch_profiler: {top: \"0\"}", "collect.torch_profiler.top: expected a whole number 1-100"),
    ("torch_profiler: {activity: cpu}", "collect.torch_profiler.activity: unknown torch_profiler option"),
    ("torch_profiler: {activities: cuda}", "cpu activities are always on"),
    ("torch_profiler: {record_shapes: maybe}", "record_shapes: expected a boolean"),
    ("torch_profilr: {}", "did you mean 'torch_profiler'"),
    ("ncu: {launch_count: \"0\"}", "collect.ncu.launch_count: expected a whole number >= 1"),
    ("ncu: {replay_mode: kernal}", "collect.ncu.replay_mode: 'kernal' is not one of"),
    ("ncu: {section: x}", "collect.ncu.section: unknown ncu option"),
])
def test_bad_collector_options_are_located_exit_2(tmp_path, collect, says) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(collect="  " + collect + "\n"))
    p = subprocess.run([sys.executable, "-m", "aorta_tui", "recipe", "validate", str(recipe)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert says in p.stdout + p.stderr and "Traceback" not in p.stderr
    assert f"{recipe}:9" in p.stdout + p.stderr  # the line of the collector's options


def test_layer_numerics_finds_the_first_bad_layer_and_dumps_the_run_up(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from aorta_tui.collect.layer_numerics import LayerNumerics

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    ln = LayerNumerics(tmp_path, {"NANLOG_SAMPLE_EVERY": "100", "NANLOG_PRE_CONTEXT": "2",
                                  "NANLOG_CHANNELS": "act,igrad"})
    ln.install()
    try:
        for step in range(5):
            x = torch.ones(3, 4)
            if step == 4:
                x[0, 0] = float("nan")  # planted: the first layer's output goes NaN at step 4
            model(x).sum().backward()
            ln.end_step()
    finally:
        summary = ln.finish()
    assert summary.first_bad == FirstBad(step=4, layer="0", direction="fwd", role="act",
                                         kind="nan")
    rows = [json.loads(line) for line in (tmp_path / "layers_rank0.jsonl").read_text().splitlines()]
    # step 0 is sampled; steps 2-3 are the run-up (pre_context 2); step 4 is written in full
    assert sorted({r["step"] for r in rows}) == [0, 2, 3, 4]
    bad = [r for r in rows if r["bad"]]
    assert bad and all(r["step"] == 4 for r in bad)
    assert {r["layer_name"] for r in rows} == {"0", "2"} and summary.watched_count == 2
    nan_rec = next(r for r in rows if r["step"] == 4 and r["layer_name"] == "0" and r["role"] == "act")
    assert nan_rec["nan_count"] == 4 and nan_rec["finite_count"] == 8
    assert summary.records_written == len(rows)
    # the hooks are gone: another forward records nothing
    model(torch.ones(1, 4))
    assert ln._pending == []


_cells = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_cells, _cells, _cells), max_size=8), header=st.booleans())
def test_rocprof_csv_summary_never_raises_or_invents(tmp_path_factory, rows, header, attack_tally) -> None:
    from aorta_tui.collect.collectors import rocprof_metrics

    d = tmp_path_factory.mktemp("csv")
    lines = (["Name,Calls,TotalDurationNs"] if header else []) + [
        ",".join('"' + c.replace('"', '""') + '"' for c in r) for r in rows]
    (d / "x_kernel_stats.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    failures = 0
    try:
        m = rocprof_metrics(d)
        json.dumps(m, allow_nan=False)  # strict JSON: no NaN / Infinity published
        if m:
            assert m["rocprof_gpu_time_ms"] >= 0 and m["rocprof_top_kernels"]
    except Exception:
        failures = 1
        raise
    finally:
        attack_tally.record("rocprof CSV summary", cases=1, failures=failures,
                            promise="never raises, strict JSON, no invented metric")


def test_layer_numerics_on_a_cuda_device_drains_once_per_step(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here (the lead's H200 runs it)")
    from aorta_tui.collect.layer_numerics import LayerNumerics

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8)).cuda()
    ln = LayerNumerics(tmp_path, {"NANLOG_SAMPLE_EVERY": "1"})
    ln.install()
    try:
        for _ in range(3):
            model(torch.randn(16, 64, device="cuda")).square().mean().backward()
            ln.end_step()
    finally:
        summary = ln.finish()
    assert summary.error is None and summary.watched_count == 2
    rows = [json.loads(line) for line in (tmp_path / "layers_rank0.jsonl").read_text().splitlines()]
    assert {r["step"] for r in rows} == {0, 1, 2} and not any(r["bad"] for r in rows)


def test_torch_profiler_wraps_the_steps_and_writes_a_trace_and_summary(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    p, run = _sweep(tmp_path, "torch_profiler: {top: \"4\"}\n", env=_no_tools_env(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    trial = run / "trials/base/trial-000"
    record = json.loads((trial / "result.json").read_text())
    assert record["argv"][1:3] == ["-m", "aorta_tui.trial.worker"]  # in-process, no wrap
    assert record["verdict"] == "pass"
    rec = record["collectors"]["torch_profiler"]
    assert rec["status"] == "ran" and rec["path"] == "torch_profiler", rec
    m = rec["metrics"]
    assert m["torch_profiler_steps"] == 3
    tops = m["torch_profiler_top_ops"]
    assert len(tops) == 4 and all(t["count"] >= 1 and t["self_cpu_ms"] >= 0 for t in tops)
    assert [t["self_cpu_ms"] for t in tops] == sorted((t["self_cpu_ms"] for t in tops), reverse=True)
    assert any(t["name"].startswith("aten::") for t in tops)
    assert m["torch_profiler_op_count"] >= sum(t["count"] for t in tops)
    assert m["torch_profiler_cpu_time_ms"] >= sum(t["self_cpu_ms"] for t in tops) - 1e-6
    if torch.cuda.is_available():  # measured: numbers, and the ops carry device time
        assert m["torch_profiler_kernel_count"] > 0 and m["torch_profiler_gpu_time_ms"] > 0
        assert all("self_device_ms" in t for t in tops)
    else:  # never a 0 that reads like a measurement
        for k in ("kernel_count", "gpu_time_ms", "top_kernel_ms", "top_kernels"):
            assert m[f"torch_profiler_{k}"].startswith("not available: no CUDA device"), k
        assert not any("self_device_ms" in t for t in tops)
    # the chrome trace: real JSON with the ops' events (the training step's matmuls)
    trace = json.loads((trial / "torch_profiler/trace.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert any(str(n).startswith("aten::") for n in names)
    assert {t["name"] for t in tops} <= names
    path = trial / "torch_profiler/summary_rank0.json"
    with RunDirFS(run) as fs:
        summary = load_summary(fs, path, TorchProfilerSummary)
    assert json_bytes(summary.to_json()) == path.read_bytes()  # the file reads back to its bytes
    assert summary.error is None and summary.steps == 3 and summary.trace == "trace.json"
    assert summary.activities == (("cpu", "cuda") if torch.cuda.is_available() else ("cpu",))
    assert "**torch_profiler**: ran in 1/1 trials" in (run / "matrix.md").read_text()
    v = subprocess.run([sys.executable, "-m", "aorta_tui", "recipe", "validate", str(tmp_path / "r.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "collect: torch_profiler runs torch.profiler" in v.stdout + v.stderr


def test_torch_profiler_in_process_cpu_only_and_no_trace(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from aorta_tui.collect.torch_profiler import TorchProfiler

    out = tmp_path / "tp"
    out.mkdir()
    (out / "trace.json").write_text("stale")  # a last attempt's trace is never reported again
    tp = TorchProfiler(out, {"activities": "cpu", "trace": "off", "top": "2"})
    model = torch.nn.Linear(8, 8)
    tp.start()
    for _ in range(2):
        model(torch.randn(4, 8)).sum().backward()
        tp.step()
    summary = tp.finish()
    assert summary.error is None and summary.activities == ("cpu",)
    assert not (out / "trace.json").exists() and summary.trace is None
    m = summary.metrics
    assert m["torch_profiler_steps"] == 2 and len(m["torch_profiler_top_ops"]) == 2
    assert m["torch_profiler_gpu_time_ms"] == ("not available: the recipe asked for CPU "
                                               "activities only (activities: cpu)")
    assert (out / "summary_rank0.json").read_bytes() == json_bytes(summary.to_json())
    # the profiler is closed: a later op is not recorded and finish() again reports no metrics
    assert tp.finish().metrics == {}


_opt_key = st.sampled_from(["activities", "record_shapes", "profile_memory", "with_stack",
                            "trace", "top", "tops", "Activities", ""])
_opt_val = st.one_of(st.sampled_from(["auto", "cpu", "cpu,cuda", "cuda", "auto,cpu", "true",
                                      "off", "0", "10", "100", "101", " 5 ", "-1", ""]), _cells)


@settings(max_examples=150, deadline=None)
@given(options=st.dictionaries(_opt_key, _opt_val, max_size=6))
@example(options={"top": "\u00b9"})  # CI: isdigit() said yes, int() raised
def test_torch_profiler_options_are_checked_never_raise(options, attack_tally) -> None:
    from aorta_tui.collect.torch_profiler import TorchProfiler, option_problems

    failures = 0
    try:
        problems = option_problems(options)
        assert all(problem and fix for _, problem, fix in problems)  # said, with the fix
        assert {k for k, _, _ in problems} <= set(options)
        if not problems:  # what passes validation is what the worker can run
            tp = TorchProfiler(Path("/nonexistent"), options)
            assert 1 <= tp.top <= 100
    except Exception:
        failures = 1
        raise
    finally:
        attack_tally.record("torch_profiler options", cases=1, failures=failures,
                            promise="located problem or accepted and runnable, never raises")


FAKE_NCU = """\
#!{python}
# A stand-in for Nsight Compute's ncu: the flags aorta-tui passes, the application after them
# run as a child; `--import R --csv --page details` prints the details page's long CSV layout.
import json, os, subprocess, sys
argv = sys.argv[1:]
if argv[:1] == ["--import"]:
    assert argv[2:] == ["--csv", "--page", "details", "--print-units", "base"], argv
    print('==PROF== a notice line ncu prints')
    cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
            "Metric Unit", "Metric Value"]
    print(",".join('"%s"' % c for c in cols))
    def row(i, k, name, unit, v):
        print(",".join('"%s"' % c for c in [i, "1", "python", "h", k, "1", "7", "(256, 1, 1)",
                                            "(4, 1, 1)", "0", "9.0", "GPU Speed Of Light Throughput",
                                            name, unit, v]))
    row("0", "ampere_sgemm_64x64", "Duration", "nsecond", "1,500,000")
    row("0", "ampere_sgemm_64x64", "Memory Throughput", "byte/second", "3,000")
    row("1", "vectorized_elementwise_kernel", "Duration", "nsecond", "250000")
    row("2", "ampere_sgemm_64x64", "Duration", "nsecond", "1500000")
    sys.exit(0)
i = 0
flags = {{}}
while argv[i].startswith("-"):
    if argv[i] == "-f":
        i += 1
        continue
    flags[argv[i]] = argv[i + 1]; i += 2
out = flags["-o"]
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out + ".argv.json", "w") as fh:
    json.dump(sys.argv, fh)
rc = subprocess.call(argv[i:])
with open(out + ".ncu-rep", "wb") as fh:
    fh.write(b"NCU report")
sys.exit(rc)
"""


def test_a_fake_ncu_wraps_the_trial_and_its_details_csv_is_summarised(tmp_path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable))
    fake.chmod(0o755)
    env = {"PATH": f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin", "NCU_BIN": ""}
    p, run = _sweep(tmp_path, "ncu: {launch_count: \"20\", kernel_regex: gemm, set: basic}\n", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    trial = run / "trials/base/trial-000"
    record = json.loads((trial / "result.json").read_text())
    argv = record["argv"]
    assert argv[:12] == [str(fake), "--target-processes", "all", "-f", "-o",
                         str(trial / "ncu/profile"), "-c", "20", "--set", "basic", "-k", "regex:gemm"]
    assert argv[13:15] == ["-m", "aorta_tui.trial.worker"]
    assert record["verdict"] == "pass"
    rec = record["collectors"]["ncu"]
    assert rec["status"] == "ran" and rec["path"] == "ncu", rec
    assert rec["metrics"] == {"ncu_kernel_count": 3, "ncu_gpu_time_ms": 3.25,
                              "ncu_top_kernel_ms": 3.0,
                              "ncu_top_kernels": ["ampere_sgemm_64x64", "vectorized_elementwise_kernel"]}
    assert (trial / "ncu/details.csv").read_bytes().startswith(b"==PROF==")
    # no ncu here: a real run stops before anything runs (exit 3), located, with the fix
    bare = tmp_path / "bare"
    bare.mkdir()
    p2, run2 = _sweep(bare, "ncu: {}\n", env=_no_tools_env(tmp_path))
    assert p2.returncode == 3 and "ncu cannot run here: ncu is not on PATH" in p2.stderr, p2.stderr
    assert run2 is None


_ncu_row = st.tuples(st.sampled_from(["0", "1", "2", ""]), _cells,
                    st.sampled_from(["Duration", "Elapsed Cycles", ""]),
                    st.sampled_from(["nsecond", "usecond", "msecond", "second", "cycle", ""]),
                    st.one_of(_cells, st.sampled_from(["1,500", "nan", "inf", "-3", "1e308", "2.5"])))


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(_ncu_row, max_size=8), tail=st.text(max_size=60))
def test_ncu_details_csv_summary_never_raises_or_invents(rows, tail, attack_tally) -> None:
    from aorta_tui.collect.ncu import details_metrics

    text = "\n".join(",".join('"' + c.replace('"', '""') + '"' for c in r) for r in rows) + tail
    failures = 0
    try:
        m = details_metrics('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n' + text)
        json.dumps(m, allow_nan=False)
        if m:
            assert m["ncu_gpu_time_ms"] >= 0 and m["ncu_kernel_count"] >= 1
    except Exception:
        failures = 1
        raise
    finally:
        attack_tally.record("ncu details CSV summary", cases=1, failures=failures,
                            promise="never raises, strict JSON, no invented metric")
