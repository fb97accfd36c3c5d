"""run.json as a typed value (store/run_meta.py): the typed writer writes the bytes the untyped
one wrote; files aorta-tui wrote read back to their own bytes; any value round-trips, a key a
newer writer added included; a damaged run.json is a located exit 2 naming the file and the
field; an oversize one is refused before it is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui import __version__
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, RunDirError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.store.run_meta import RunMeta, read_run_meta, write_run_meta

FIXTURES = Path(__file__).parents[1] / "tui" / "fixtures" / "aorta-out" / "TUI-DEMO"
WRITTEN = sorted(FIXTURES.glob("*/run.json"))


def _old_writer(meta: dict[str, Any]) -> bytes:
    """What ``write_run_meta`` wrote before the type (its body, verbatim, as bytes)."""
    return json_bytes({"aorta_tui_version": __version__, **meta})


# -- the bytes -----------------------------------------------------------------------------

_text = st.text(max_size=12)  # lone surrogates included: an argv's undecodable bytes
_strings = st.lists(_text, max_size=4)
# the orchestrator's keys and values (sweep/orchestrator.py), with run_id (today's writer)
# and without (the writer before issue 37)
_orchestrator_meta = st.fixed_dictionaries(
    {"recipe_hash": st.text("0123456789abcdef", min_size=1, max_size=64),
     "recipe_source": _text, "mode": st.sampled_from(["triage", "probe"]),
     "command": _strings, "created_at": st.floats(0, 4e9), "argv": _strings},
    optional={"run_id": _text})


# the keys in the order the orchestrator's dict had them (run_id since issue 37)
ORCHESTRATOR_KEYS = ("run_id", "recipe_hash", "recipe_source", "mode", "command", "created_at",
                     "argv")


def _typed(meta: dict[str, Any]) -> RunMeta:
    """The same run.json as the orchestrator builds it now."""
    return RunMeta(aorta_tui_version=__version__, run_id=meta.get("run_id"),
                   recipe_hash=meta["recipe_hash"], recipe_source=meta["recipe_source"],
                   mode=meta["mode"], command=tuple(meta["command"]),
                   created_at=meta["created_at"], argv=tuple(meta["argv"]))


@given(_orchestrator_meta)
def test_the_typed_writer_writes_the_untyped_writers_bytes(meta: dict[str, Any]) -> None:
    meta = {k: meta[k] for k in ORCHESTRATOR_KEYS if k in meta}  # the writer's order
    old = _old_writer(meta)
    assert json_bytes(_typed(meta).to_json()) == old
    again = RunMeta.from_dict(json.loads(old))
    assert again == _typed(meta) and json_bytes(again.to_json()) == old


def test_write_run_meta_writes_the_file_the_old_writer_wrote(tmp_path: Path) -> None:
    meta = {"run_id": "20261205-001500-ab12", "recipe_hash": "ab" * 32, "recipe_source": "",
            "mode": "probe", "command": ["sh", "-c", "echo \u00e9 \udcff"],
            "created_at": 1795943678.7678502, "argv": ["/usr/bin/aorta-tui", "--batch", "r.yaml"]}
    write_run_meta(tmp_path, _typed(meta))
    assert (tmp_path / "run.json").read_bytes() == _old_writer(meta)
    assert read_run_meta(tmp_path) == _typed(meta)


@pytest.mark.parametrize("path", WRITTEN, ids=[p.parent.name for p in WRITTEN])
def test_files_the_untyped_writer_wrote_read_back_to_the_same_bytes(path: Path) -> None:
    meta = read_run_meta(path.parent)
    assert json_bytes(meta.to_json()) == path.read_bytes()
    assert meta.run_id is None  # written before run.json kept the run's id
    assert meta.mode == "probe" and meta.recipe_hash and meta.argv and meta.argv[1] == "--batch"


# -- properties ----------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_known = frozenset(RunMeta(aorta_tui_version="", run_id="", recipe_hash="x", recipe_source="",
                           mode="", command=(), created_at=0, argv=()).to_json())
_metas = st.builds(
    RunMeta, aorta_tui_version=st.none() | _text, run_id=st.none() | _text,
    recipe_hash=st.none() | _text.filter(bool), recipe_source=st.none() | _text,
    mode=st.none() | _text, command=st.none() | _strings.map(tuple),
    created_at=st.none() | st.floats(-1e300, 1e300) | st.integers(0, 2**53),
    argv=st.none() | _strings.map(tuple),
    extra=st.dictionaries(_text.filter(lambda k: k not in _known), _json, max_size=3))


@given(_metas)
def test_any_run_meta_reads_back_to_itself_and_its_bytes(meta: RunMeta) -> None:
    written = json_bytes(meta.to_json())
    again = RunMeta.from_dict(json.loads(written))
    assert again == meta
    assert json_bytes(again.to_json()) == written


def test_a_key_a_newer_writer_added_is_kept_after_the_known_ones() -> None:
    doc = {"aorta_tui_version": "9.0", "host": {"name": "n1"}, "run_id": "r", "recipe_hash": "h"}
    meta = RunMeta.from_dict(doc)
    assert meta.extra == {"host": {"name": "n1"}} and meta.run_id == "r"
    assert list(meta.to_json()) == ["aorta_tui_version", "run_id", "recipe_hash", "host"]
    assert meta.to_json() == doc  # nothing lost, only the writer's order


def test_an_empty_run_json_reads_as_a_run_that_recorded_nothing() -> None:
    # a run directory made by hand (tests/reliability/test_rel_proc_sudo.py writes "{}"): the
    # resume says which field it misses, not that the file is no run.json
    assert RunMeta.from_dict({}) == RunMeta() and RunMeta().to_json() == {}


# -- damage ----------------------------------------------------------------------------------

DAMAGED = [
    ("run_id", 7, "run_id: expected a string"),
    ("aorta_tui_version", None, "aorta_tui_version: expected a string"),
    ("mode", ["probe"], "mode: expected a string"),
    ("command", "sh -c x", "command: expected an array"),
    ("argv", ["aorta-tui", 3], r"argv\[1\]: expected a string"),
    ("created_at", "yesterday", "created_at: expected a finite number"),
    ("created_at", True, "created_at: expected a finite number"),
    ("recipe_hash", "", "recipe_hash is not a hash: ''"),
    ("recipe_hash", ["not", "a", "hash"], r"recipe_hash is not a hash: \['not'"),
]


@pytest.mark.parametrize(("key", "value", "message"), DAMAGED,
                         ids=[f"{k}={v!r}" for k, v, _m in DAMAGED])
def test_a_damaged_run_json_names_the_file_and_the_field(
        tmp_path: Path, key: str, value: object, message: str) -> None:
    doc = json.loads(WRITTEN[0].read_text())
    doc[key] = value
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(RunDirError, match=f"^{tmp_path / 'run.json'}: {message}") as caught:
        read_run_meta(tmp_path)
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint
    with pytest.raises(UsageError, match=f"^run.json: {message}"):
        RunMeta.from_dict(doc)


@pytest.mark.parametrize("doc", [[], "run", 3, None])
def test_a_run_json_that_is_no_object_names_the_file(tmp_path: Path, doc: object) -> None:
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(RunDirError, match=f"^{tmp_path / 'run.json'}: .*expected an object"):
        read_run_meta(tmp_path)


def test_an_oversize_run_json_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with (tmp_path / "run.json").open("wb") as fh:
        fh.truncate(INPUT_LIMITS["run meta"] + 1)  # sparse: nothing to read if it were read
    with pytest.raises(RunDirError, match="over the 4.0 MiB limit") as caught:
        read_run_meta(tmp_path)
    assert str(tmp_path / "run.json") in caught.value.message
    assert caught.value.exit_code == ExitCode.USAGE


# -- a real run, and a caller that forgives ----------------------------------------------------


def test_a_real_runs_run_json_and_plan_read_back_to_their_bytes(tmp_path: Path) -> None:
    """The real CLI writes both documents through their types; each reads back to its bytes."""
    from aorta_tui.store.plan_doc import read_plan
    from tests.engine_support import probe_run

    run_dir = probe_run(tmp_path)
    meta = read_run_meta(run_dir)
    assert json_bytes(meta.to_json()) == (run_dir / "run.json").read_bytes()
    assert meta.run_id == run_dir.name and meta.aorta_tui_version == __version__
    assert meta.extra == {} and meta.mode == "probe" and meta.argv and "--batch" in meta.argv
    plan = read_plan(run_dir)
    assert json_bytes(plan.to_dict()) == (run_dir / "plan.json").read_bytes()
    assert plan.trials and all(t.cell and t.trial is not None for t in plan.trials)


def test_a_bundle_ships_a_run_whose_run_json_fields_are_damaged(tmp_path: Path) -> None:
    """The bundle reads run.json through the type; a damaged field costs its manifest the
    recipe hash, never the bundle (a damaged run is what one sends)."""
    from aorta_tui.bundle.archive import identify_input

    run = tmp_path / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text("")
    doc = json.loads(WRITTEN[0].read_text())
    (run / "run.json").write_text(json.dumps(doc))
    assert identify_input(run).recipe_hash == doc["recipe_hash"]
    (run / "run.json").write_text(json.dumps({**doc, "argv": "aorta-tui --batch"}))
    assert identify_input(run).recipe_hash is None
    (run / "run.json").write_text("[")  # no JSON at all: refused, as it always was
    with pytest.raises(UsageError, match="not valid JSON"):
        identify_input(run)
