"""The file fuzzer: every file kind aorta-tui reads (other than recipes, sidecars, journals),
damaged every way we could think of, must give a located exit 2 (or a normal result), never an
internal error (exit 70), never a traceback, never a hang.

Per kind: an env snapshot (``env summary`` / ``env diff`` / ``--field``), a queue result and a
queue sweep (``queue compare``), a policy file (``policy list --policy-file``), a profiler trace
(the CUPTI join's loader; no CLI reads one). Inputs start from real files (the fixtures under
``tests/fixtures/``, written by the tool) and are damaged by

* a wrong type at every field path (deterministic sweep, the hostile value rotating),
* hypothesis mutations: a wrong value at a random path, a deleted or renamed key, a
  truncation, flipped or inserted bytes,
* hostile files: empty, ``\\xff{}``, 200k nested ``[``, a 5000-digit integer, ``1e400``, a
  sparse file over the size limit, a FIFO, ``/dev/zero``, a directory, a symlink loop.

Most cases run in-process (loader plus consumers; only an AortaError may escape). A sample
runs through the real CLI in subprocesses (exit code in {0,1,2,3}, no "Traceback", within a
timeout). Counts go to ``attack_tally``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from aorta_tui.core.errors import AortaError
from aorta_tui.core.inputs import INPUT_LIMITS

if TYPE_CHECKING:
    from aorta_tui.envsnap import Snapshot

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"
SNAPSHOTS = [FIX / "envsnap" / n for n in ("h200.json", "cpu-box.json", "upstream-h200.json",
                                             "upstream-cpu-box.json")]
RESULTS = [FIX / "hwqueue" / n for n in ("run-cpu.json", "run-cpu-repeat3.json")]
SWEEP = FIX / "hwqueue" / "sweep-cpu.json"
POLICY_YAML = """\
schema_version: 1
policies:
  four_connections:
    description: four hardware work queues
    vendor: cuda
    kind: scheduling
    env: {CUDA_DEVICE_MAX_CONNECTIONS: "4"}
    harness_args: ["--sync-mode", "end_only"]
    gpu_control: {clock_level: 5, power_limit_w: 300}
  rocm_queues:
    vendor: rocm
    env: {GPU_MAX_HW_QUEUES: "2", HSA_XNACK: "1"}
"""
CLI_TIMEOUT_S = 60
OK_EXITS = {0, 1, 2, 3}
PROMISE = "located exit 2, no hang, never 70"

# Values that are the wrong type (or a hostile value of the right type) somewhere.
HOSTILE: list[Any] = [None, True, 0, -1, 1.5, 10**400, "x", "", [], {}, [[1, [2]]],
                      {"value": 1, "state": "ok", "source": ""}, "\x00" * 3, 1e300, -1e300,
                      {"a": {"b": {"c": []}}}, ["a", "b"], "ok", "higher"]


# -- damaging a document -----------------------------------------------------------------

PathKey = tuple[Any, ...]


def field_paths(node: Any, path: PathKey = (), max_items: int = 3) -> Iterator[PathKey]:
    """Every path in ``node`` (list items: the first ``max_items``), parents first."""
    yield path
    if isinstance(node, dict):
        for key, child in node.items():
            yield from field_paths(child, (*path, key), max_items)
    elif isinstance(node, list):
        for i, child in enumerate(node[:max_items]):
            yield from field_paths(child, (*path, i), max_items)


def replaced(doc: Any, path: PathKey, value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def deleted(doc: Any, path: PathKey) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def renamed(doc: Any, path: PathKey) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[f"{path[-1]}_x"] = node.pop(path[-1])
    return out


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False)
    | st.text(max_size=10) | st.sampled_from(HOSTILE),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=6)


@st.composite
def mutated_bytes(draw: st.DrawFn, seeds: list[tuple[Any, bytes]]) -> bytes:
    """A real document damaged once: a field replaced/deleted/renamed, cut short, or bytes."""
    doc, raw = draw(st.sampled_from(seeds))
    how = draw(st.sampled_from(["replace", "replace", "replace", "delete", "rename", "truncate",
                                "flip", "insert"]))
    if how in ("replace", "delete", "rename"):
        paths = list(field_paths(doc))
        path = draw(st.sampled_from(paths))
        if how == "replace":
            return json.dumps(replaced(doc, path, draw(json_values))).encode()
        if not path or isinstance(path[-1], int):
            return json.dumps(replaced(doc, path, draw(json_values))).encode()
        return json.dumps(deleted(doc, path) if how == "delete" else renamed(doc, path)).encode()
    if how == "truncate":
        return raw[: draw(st.integers(0, max(len(raw) - 1, 0)))]
    at = draw(st.integers(0, max(len(raw) - 1, 0)))
    blob = draw(st.binary(min_size=1, max_size=4))
    if how == "flip":
        return raw[:at] + blob + raw[at + len(blob):]
    return raw[:at] + blob + raw[at:]


def every_path_cases(seeds: list[tuple[Any, bytes]], max_depth: int | None = None
                     ) -> Iterator[bytes]:
    """A wrong value at every field path of every seed (the value rotates through HOSTILE)."""
    k = 0
    for doc, _raw in seeds:
        for path in field_paths(doc):
            if max_depth is not None and len(path) > max_depth:
                continue
            yield json.dumps(replaced(doc, path, HOSTILE[k % len(HOSTILE)])).encode()
            k += 1


# -- hostile files -----------------------------------------------------------------------


def hostile_files(root: Path, kind_limit: int, suffix: str = ".json") -> list[Path]:
    """Files no reader should block on, run out of memory on, or crash on."""
    root.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []

    def file(name: str, data: bytes) -> None:
        p = root / f"{name}{suffix}"
        p.write_bytes(data)
        made.append(p)

    file("empty", b"")
    file("blank", b"  \n\t\n")
    file("ff", b"\xff{}")
    file("bom", b"\xef\xbb\xbf{}")
    file("deep-array", b"[" * 200_000)
    file("deep-object", b'{"a":' * 100_000)
    file("deep-closed", b"[" * 5000 + b"]" * 5000)
    file("long-int", b'{"schema_version": ' + b"9" * 5000 + b"}")
    file("inf", b'{"schema_version": 1e400}')
    file("nan", b"[NaN, Infinity]")
    file("null", b"null")
    file("array", b"[1, 2]")
    file("string", b'"x"')
    file("nul", b"\x00" * 64)
    big = root / f"over-limit{suffix}"
    with open(big, "wb") as fh:  # sparse: costs no disk, only the reader's restraint
        fh.truncate(kind_limit + 1)
    made.append(big)
    fifo = root / f"fifo{suffix}"
    os.mkfifo(fifo)
    made.append(fifo)
    (root / "a-directory").mkdir()
    made.append(root / "a-directory")
    loop = root / f"loop{suffix}"
    os.symlink(loop, loop)
    made.append(loop)
    made.append(root / f"missing{suffix}")
    made.append(Path("/dev/zero"))
    made.append(Path("/dev/null"))
    return made


# -- running a case ----------------------------------------------------------------------


def in_process(consume: Callable[[Path], None], path: Path) -> str | None:
    """None when ``consume`` returned or raised an AortaError; else what went wrong."""
    try:
        consume(path)
    except AortaError as exc:
        if not exc.render().strip():
            return f"{path.name}: an empty error message"
    except BaseException as exc:  # noqa: BLE001 - anything else is the bug this looks for
        return f"{path.name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
    return None


def run_cli(args: list[str], cwd: Path) -> str | None:
    """None when the real CLI exited 0-3 without a traceback in time; else the problem."""
    try:
        proc = subprocess.run([sys.executable, "-m", "aorta_tui", *args], cwd=cwd,
                              capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"{args}: no answer within {CLI_TIMEOUT_S} s (a hang)"
    if proc.returncode not in OK_EXITS or "Traceback" in proc.stderr + proc.stdout:
        return f"{args}: exit {proc.returncode}: {proc.stderr[-800:]}"
    if proc.returncode == 2 and not proc.stderr.startswith("error: "):
        return f"{args}: exit 2 without a located message: {proc.stderr[-300:]}"
    return None


def run_cli_cases(cases: list[list[str]], cwd: Path) -> list[str]:
    with ThreadPoolExecutor(max_workers=4) as pool:  # subprocesses mostly wait on imports
        return [p for p in pool.map(lambda a: run_cli(a, cwd), cases) if p]


class Harness:
    """Counts the cases of one file kind; every case's file is written under ``root``."""

    def __init__(self, root: Path, consume: Callable[[Path], None], suffix: str = ".json") -> None:
        self.root = root
        self.consume = consume
        self.suffix = suffix
        self.cases = 0
        self.failures: list[str] = []
        self._n = 0

    def write(self, data: bytes) -> Path:
        self._n += 1
        path = self.root / f"case-{self._n}{self.suffix}"
        path.write_bytes(data)
        return path

    def check(self, path: Path) -> None:
        self.cases += 1
        problem = in_process(self.consume, path)
        if problem:
            self.failures.append(problem)

    def check_bytes(self, data: bytes) -> None:
        path = self.write(data)
        self.check(path)
        path.unlink()

    def hypothesis(self, seeds: list[tuple[Any, bytes]], examples: int) -> None:
        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(mutated_bytes(seeds))
        def run(data: bytes) -> None:
            self.check_bytes(data)

        run()


def seeds_of(paths: list[Path]) -> list[tuple[Any, bytes]]:
    return [(json.loads(p.read_bytes()), p.read_bytes()) for p in paths]


@pytest.fixture()
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rel-files-"))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


# -- env snapshot ------------------------------------------------------------------------


def consume_snapshot(path: Path) -> None:
    """What `env summary`, `env summary --field` and `env diff` do with a snapshot."""
    from aorta_tui.envsnap import UpstreamSnapshot, diff_snapshots, load_snapshot, snapshot_hash
    from aorta_tui.envsnap.diff import render_text as render_diff
    from aorta_tui.envsnap.query import get_field
    from aorta_tui.envsnap.summary import render_text, summarize
    from aorta_tui.envsnap.upstream import get_upstream_field

    snap = load_snapshot(path)
    render_text(summarize(snap))
    good = _good_snapshot()
    for a, b in ((snap, good), (good, snap)):
        report = diff_snapshots(a, b, include_volatile=True)
        render_diff(report)
        json.dumps(report.to_dict(), default=str)
    if isinstance(snap, UpstreamSnapshot):
        for field in ("host.kernel_release", "env_vars", "pytorch_version"):
            with contextlib.suppress(AortaError):  # a missing key is a fine answer
                json.dumps(get_upstream_field(snap.data, field))
        return
    snapshot_hash(snap)
    for field in ("host.kernel_release", "gpus.0.name", "torch", "host.kernel_release.state"):
        with contextlib.suppress(AortaError):
            json.dumps(get_field(snap, field))


@functools.cache
def _good_snapshot() -> Snapshot:
    from aorta_tui.envsnap import load_snapshot

    return load_snapshot(FIX / "envsnap" / "cpu-box.json")


def test_env_snapshot_fuzzer(work: Path, attack_tally: Any) -> None:
    h = Harness(work, consume_snapshot)
    seeds = seeds_of(SNAPSHOTS)
    for path in hostile_files(work / "hostile", INPUT_LIMITS["snapshot"]):
        h.check(path)
    for data in every_path_cases(seeds, max_depth=2):
        h.check_bytes(data)
    h.hypothesis(seeds, examples=100)
    # the real CLI: hostile files and a sample of damaged ones, each kind of command
    cli: list[list[str]] = []
    good = str(FIX / "envsnap" / "h200.json")
    for i, path in enumerate(hostile_files(work / "cli", INPUT_LIMITS["snapshot"])):
        cmd = [["env", "summary", str(path)], ["env", "diff", good, str(path)],
               ["env", "summary", str(path), "--field", "host"]][i % 3]
        cli.append(cmd)
    damaged = list(every_path_cases(seeds, max_depth=1))
    for i, data in enumerate(damaged[:: max(len(damaged) // 20, 1)]):
        path = h.write(data)
        cli.append([["env", "summary", str(path)], ["env", "diff", str(path), good, "--json"],
                    ["env", "summary", str(path), "--json"]][i % 3])
    cli_failures = run_cli_cases(cli, work)
    attack_tally.record("file fuzzer: env snapshot", cases=h.cases + len(cli),
                        failures=len(h.failures) + len(cli_failures), promise=PROMISE)
    assert not h.failures, "\n\n".join(h.failures[:5])
    assert not cli_failures, "\n\n".join(cli_failures[:5])


# -- queue result and queue sweep --------------------------------------------------------


@pytest.fixture()
def quick_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """20 bootstrap resamples instead of 1000: the shapes compare walks are the same, the
    statistics are not what this test judges, and each case is 50x faster."""
    from aorta_tui.hwqueue import compare

    monkeypatch.setattr(compare, "bootstrap_ci",
                        functools.partial(compare.bootstrap_ci, resamples=20))


def consume_queue(path: Path) -> None:
    """What `queue compare` does: load, compare both ways against a good file of its kind."""
    from aorta_tui.hwqueue.compare import compare_files
    from aorta_tui.hwqueue.result import load_result
    from aorta_tui.hwqueue.result_doc import QueueSweep

    doc = load_result(path)
    good = _good_queue(isinstance(doc, QueueSweep))
    for a, b in ((doc, good), (good, doc)):
        report = compare_files(a, b)
        json.dumps(report)
        for r in report["rows"]:
            if r.get("change") is not None:
                f"{r['change'] * 100:+.1f}%"  # noqa: B018 - the CLI's formatting


@functools.cache
def _good_queue(sweep: bool) -> Any:
    from aorta_tui.hwqueue.result import load_result

    return load_result(SWEEP if sweep else RESULTS[0])


def test_queue_result_fuzzer(work: Path, attack_tally: Any, quick_bootstrap: None) -> None:
    h = Harness(work, consume_queue)
    seeds = seeds_of(RESULTS)
    for path in hostile_files(work / "hostile", INPUT_LIMITS["queue result"]):
        h.check(path)
    for data in every_path_cases(seeds):
        h.check_bytes(data)
    h.hypothesis(seeds, examples=200)
    cli_failures = _queue_cli(h, seeds, work, RESULTS[0])
    attack_tally.record("file fuzzer: queue result", cases=h.cases, promise=PROMISE,
                        failures=len(h.failures) + len(cli_failures))
    assert not h.failures, "\n\n".join(h.failures[:5])
    assert not cli_failures, "\n\n".join(cli_failures[:5])


def test_queue_sweep_fuzzer(work: Path, attack_tally: Any, quick_bootstrap: None) -> None:
    h = Harness(work, consume_queue)
    seeds = seeds_of([SWEEP])
    for data in every_path_cases(seeds):
        h.check_bytes(data)
    h.hypothesis(seeds, examples=100)
    cli_failures = _queue_cli(h, seeds, work, SWEEP, hostile=False)
    attack_tally.record("file fuzzer: queue sweep", cases=h.cases, promise=PROMISE,
                        failures=len(h.failures) + len(cli_failures))
    assert not h.failures, "\n\n".join(h.failures[:5])
    assert not cli_failures, "\n\n".join(cli_failures[:5])


def _queue_cli(h: Harness, seeds: list[tuple[Any, bytes]], work: Path, good: Path,
               hostile: bool = True) -> list[str]:
    cli: list[list[str]] = []
    if hostile:
        for i, path in enumerate(hostile_files(work / "cli", INPUT_LIMITS["queue result"])):
            pair = [str(path), str(good)] if i % 2 else [str(good), str(path)]
            cli.append(["queue", "compare", *pair])
    damaged = list(every_path_cases(seeds, max_depth=2))
    for i, data in enumerate(damaged[:: max(len(damaged) // 15, 1)]):
        path = h.write(data)
        cli.append(["queue", "compare", str(path), str(good), *(["--json"] if i % 2 else [])])
    h.cases += len(cli)
    return run_cli_cases(cli, work)


# -- policy file -------------------------------------------------------------------------


def consume_policy(path: Path) -> None:
    """What `policy list --policy-file` and `policy sweep --policy-file` do before a trial."""
    from aorta_tui.policy.file import load_policy_file
    from aorta_tui.policy.presets import all_policies, resolve_policies

    user = load_policy_file(path)
    rows = [{**p.to_dict(), "sets": p.summary()} for p in all_policies(user)]
    json.dumps(rows)
    resolve_policies(["baseline", *(p.name for p in user)], user)


def test_policy_file_fuzzer(work: Path, attack_tally: Any) -> None:
    import yaml

    doc = yaml.safe_load(POLICY_YAML)
    seeds = [(doc, POLICY_YAML.encode()), (doc, json.dumps(doc, indent=1).encode())]
    yaml_h = Harness(work / "y", consume_policy, suffix=".yaml")
    json_h = Harness(work / "j", consume_policy, suffix=".json")
    for h in (yaml_h, json_h):
        h.root.mkdir()
        for path in hostile_files(h.root / "hostile", INPUT_LIMITS["policy file"], h.suffix):
            h.check(path)
        for data in every_path_cases(seeds[:1]):
            h.check_bytes(data)
        h.hypothesis(seeds, examples=150)
    yaml_h.check_bytes(b"a: &a [" + b"*a, " * 10 + b"]\n" + b"".join(
        f"b{i}: &b{i} [*b{i - 1}, *b{i - 1}]\n".encode() if i else b"b0: &b0 [*a, *a]\n"
        for i in range(30)))  # billion laughs
    yaml_h.check_bytes(b"policies: " + b"[" * 200_000)
    cli: list[list[str]] = []
    for path in hostile_files(work / "cli", INPUT_LIMITS["policy file"], ".yaml"):
        cli.append(["policy", "list", "--policy-file", str(path), "--json"])
    damaged = list(every_path_cases(seeds[:1]))
    for data in damaged[:: max(len(damaged) // 8, 1)]:
        cli.append(["policy", "list", "--policy-file", str(json_h.write(data))])
    cli.append(["policy", "sweep", "tiny_kernel_stress", "--policy-file", "/dev/zero", "--dry-run"])
    cli.append(["policy", "sweep", "tiny_kernel_stress", "--policy-file",
                str(work / "cli" / "fifo.yaml"), "--dry-run"])
    cli_failures = run_cli_cases(cli, work)
    cases = yaml_h.cases + json_h.cases + len(cli)
    failures = yaml_h.failures + json_h.failures
    attack_tally.record("file fuzzer: policy file", cases=cases, promise=PROMISE,
                        failures=len(failures) + len(cli_failures))
    assert not failures, "\n\n".join(failures[:5])
    assert not cli_failures, "\n\n".join(cli_failures[:5])


# -- profiler trace (the CUPTI join; read by no CLI command) --------------------------------


def _profiler_trace() -> dict[str, Any]:
    """A Chrome trace of the shape torch.profiler exports: 4 launches, their kernels, metadata."""
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1,
                                     "args": {"name": "python"}}]
    for i in range(4):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "ts": 100.0 + 10 * i, "dur": 2.0, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": 104.0 + 10 * i,
                       "dur": 3.0, "args": {"correlation": i + 1, "stream": 7}})
    return {"schemaVersion": 1, "traceEvents": events}


def consume_profiler_trace(path: Path) -> None:
    import numpy as np

    from aorta_tui.trace import cupti_join

    launches, kernels = cupti_join.load_profiler_trace(path)
    ts = np.array([1000 * (100 + 10 * i) for i in range(len(launches))], dtype=np.int64)
    json.dumps(cupti_join.join(ts, np.zeros(len(ts), dtype=np.int64), launches, kernels),
               default=str)


def test_profiler_trace_fuzzer(work: Path, attack_tally: Any) -> None:
    doc = _profiler_trace()
    seeds = [(doc, json.dumps(doc).encode())]
    h = Harness(work, consume_profiler_trace)
    for path in hostile_files(work / "hostile", INPUT_LIMITS["profiler trace"]):
        h.check(path)
    for data in every_path_cases(seeds):
        h.check_bytes(data)
    h.hypothesis(seeds, examples=100)
    attack_tally.record("file fuzzer: profiler trace", cases=h.cases, failures=len(h.failures),
                        promise="located UsageError, no hang (in-process: no CLI reads it)")
    assert not h.failures, "\n\n".join(h.failures[:5])
