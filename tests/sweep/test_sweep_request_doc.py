"""A sweep request file (sweep/way_in.py: an engine caller's hand-over to sweep/child.py) as a
typed value: ``SweepRequest.to_json`` is the object the untyped writer wrote (its code copied
below, verbatim), any request reads back to itself, a file the agent writes reads back to its
exact bytes, damage is a located UsageError, and an oversize file is refused unread."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.sweep.way_in import SweepRequest, read_request, write_request

_text = st.text(max_size=10)  # no lone surrogate: hypothesis draws none by default
_path = st.builds(Path, st.text(st.characters(whitelist_categories=("L", "N")), min_size=1,
                                max_size=12))
_opt_int = st.none() | st.integers(-5, 2**40)
_opt_text = st.none() | _text
_requests = st.builds(
    SweepRequest, recipe=st.none() | _path, command=st.lists(_text, max_size=3),
    resume=st.none() | _path, trust_run_dir=st.booleans(), output=_path, strict=st.booleans(), order=_opt_text, seed=_opt_int,
    ticket=_opt_text, mitigation_files=st.lists(_path, max_size=2), workload=_opt_text,
    mitigation_axis=_opt_text, environment_axis=_opt_text, trials=_opt_int, steps=_opt_int,
    snapshots=st.booleans(), stop_after_events=_opt_int, max_trials=_opt_int,
    disable_detectors=st.lists(_text, max_size=2), env_passthrough_mode=_opt_text,
    collect=st.lists(_text, max_size=2), baseline_cell=_opt_text,
    confound_threshold=st.none() | st.floats(-1e9, 1e9),
    trial_isolation=_opt_text, bytecode_cache=_opt_text, executor=_opt_text, nodes=_opt_int,
    gpus_per_node=_opt_int, secret_values_fd=_opt_int)


def _plain(value: Any) -> Any:
    # verbatim: sweep/way_in.py before the type
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _old_request(req: SweepRequest) -> dict[str, Any]:
    # verbatim: sweep/way_in.py write_request before the type (the object it wrote)
    data = {f.name: _plain(getattr(req, f.name)) for f in dataclasses.fields(req) if f.name != "metrics"}
    return data


@settings(max_examples=150, deadline=None)
@given(_requests)
def test_the_writer_writes_the_untyped_writers_bytes(req: SweepRequest) -> None:
    assert json_bytes(req.to_json()) == json_bytes(_old_request(req))


@settings(max_examples=150, deadline=None)
@given(_requests)
def test_any_request_reads_back_to_itself(req: SweepRequest) -> None:
    assert SweepRequest.from_json(json.loads(json_bytes(req.to_json())), "req.json") == req


def test_a_file_the_agent_writes_reads_back_to_its_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "iter-01.request.json"
    req = SweepRequest(recipe=tmp_path / "iter-01.yaml", resume=None,  # as agent/loop.py's
                       mitigation_files=[tmp_path / "iter-01.mitigations.json"], snapshots=False,
                       command=["bash", "run.sh"], output=tmp_path / "out", secret_values_fd=7)
    write_request(req, path)
    read = read_request(path)
    assert read == req and json_bytes(read.to_json()) == path.read_bytes()


# The file agent/loop.py wrote before the command line's view (--dry-run, --json, -v) left the
# request, byte for byte (written by that version for the request read back below)
_OLDER_AGENTS_FILE = (
    '{\n'
    '  "recipe": "/a/iter-01.yaml",\n'
    '  "command": [\n'
    '    "bash",\n'
    '    "run.sh"\n'
    '  ],\n'
    '  "dry_run": false,\n'
    '  "resume": null,\n'
    '  "trust_run_dir": false,\n'
    '  "output": "/a/out",\n'
    '  "json_mode": false,\n'
    '  "strict": false,\n'
    '  "order": null,\n'
    '  "seed": null,\n'
    '  "ticket": null,\n'
    '  "mitigation_files": [\n'
    '    "/a/iter-01.mitigations.json"\n'
    '  ],\n'
    '  "workload": null,\n'
    '  "mitigation_axis": null,\n'
    '  "environment_axis": null,\n'
    '  "trials": null,\n'
    '  "steps": null,\n'
    '  "snapshots": false,\n'
    '  "stop_after_events": null,\n'
    '  "max_trials": null,\n'
    '  "disable_detectors": [],\n'
    '  "env_passthrough_mode": null,\n'
    '  "collect": [],\n'
    '  "baseline_cell": null,\n'
    '  "confound_threshold": null,\n'
    '  "verbose": 0,\n'
    '  "trial_isolation": null,\n'
    '  "bytecode_cache": null,\n'
    '  "executor": null,\n'
    '  "nodes": null,\n'
    '  "gpus_per_node": null,\n'
    '  "secret_values_fd": 7\n'
    '}\n'
)
_VIEW_LINES = ('  "dry_run": false,\n', '  "json_mode": false,\n', '  "verbose": 0,\n')


def test_an_older_agents_file_reads_and_writes_back_less_the_views_keys(tmp_path: Path) -> None:
    # a resumed agent may hand over a file an older version wrote: read, its view keys dropped;
    # every key that stays keeps its bytes and its place
    path = tmp_path / "iter-01.request.json"
    path.write_text(_OLDER_AGENTS_FILE)
    read = read_request(path)
    assert read == SweepRequest(recipe=Path("/a/iter-01.yaml"), command=["bash", "run.sh"],
                                output=Path("/a/out"), snapshots=False, secret_values_fd=7,
                                mitigation_files=[Path("/a/iter-01.mitigations.json")])
    write_request(read, tmp_path / "again.json")
    kept = "".join(line for line in _OLDER_AGENTS_FILE.splitlines(keepends=True)
                   if line not in _VIEW_LINES)
    assert (tmp_path / "again.json").read_text() == kept and len(kept) < len(_OLDER_AGENTS_FILE)
    # their values never steered the engine: an older dry run's file reads as the same request
    older = json.loads(_OLDER_AGENTS_FILE)
    assert SweepRequest.from_json({**older, "dry_run": True, "verbose": 2}, "r") == read


def test_a_missing_field_reads_as_its_default() -> None:
    assert SweepRequest.from_json({}, "req.json") == SweepRequest()
    assert SweepRequest.from_json({"confound_threshold": 3}, "r").confound_threshold == 3.0


@pytest.mark.parametrize(("key", "value", "words"), [
    ("recipe", "", "recipe: expected a path (a non-empty string)"),
    ("output", None, "output: expected a string"),
    ("command", "sh", "command: expected an array"),
    ("command", ["sh", 1], "command[1]: expected a string"),
    ("seed", 1.5, "seed: expected an integer or null"),
    ("snapshots", 1, "snapshots: expected true or false"),
    ("no_such_field", 1, "'no_such_field': not a field of a sweep request"),
])
def test_damage_is_located(key: str, value: object, words: str) -> None:
    with pytest.raises(UsageError) as got:
        SweepRequest.from_json({**SweepRequest().to_json(), key: value}, "req.json")
    assert str(got.value).startswith(f"req.json: {words}")
    assert got.value.exit_code == ExitCode.USAGE and got.value.hint
    with pytest.raises(UsageError, match=r"^req\.json: \(top level\): expected an object"):
        SweepRequest.from_json([], "req.json")


def test_an_oversize_file_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    path = tmp_path / "req.json"
    write_request(SweepRequest(recipe=Path("r.yaml")), path)
    monkeypatch.setitem(INPUT_LIMITS, "sweep request", 64)
    with pytest.raises(UsageError, match="over the 64 B limit"):
        read_request(path)


def test_the_request_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SweepRequest().output = Path("elsewhere")  # type: ignore[misc]
