"""matrix.json as a typed value (sweep/matrix_doc.py): the file a real sweep writes reads back
to the same document and the same matrix.md; any matrix round-trips; a damaged one is a located
exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.aggregate import CellStats
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.sweep.matrix_doc import Devices, Matrix, MatrixCell, MatrixTrial, read_matrix
from aorta_tui.sweep.matrix_report import render_markdown
from tests.engine_support import probe_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return probe_run(tmp_path_factory.mktemp("matrix-run"))


def test_a_real_matrix_reads_back_to_the_same_document_and_markdown(run_dir: Path) -> None:
    doc = json.loads((run_dir / "matrix.json").read_text())
    matrix = read_matrix(run_dir)
    assert json.dumps(matrix.to_json()) == json.dumps(doc)  # values and key order
    assert render_markdown(matrix) == (run_dir / "matrix.md").read_text()
    failing = matrix.cell("gpu_max_hw_queues_2-none")
    assert failing is not None and failing.stats.failed == 2
    assert failing.mitigations == ("gpu_max_hw_queues_2",)
    assert {t.verdict for t in matrix.trials if t.cell == failing.name} == {"fail"}


def test_a_field_of_the_wrong_type_is_a_located_exit_2(tmp_path: Path) -> None:
    (tmp_path / "matrix.json").write_text(json.dumps(
        {"status": "completed", "cells": [{"cell": "a", "trials": "two"}]}))
    with pytest.raises(UsageError) as err:
        read_matrix(tmp_path)
    assert err.value.exit_code == ExitCode.USAGE
    assert "matrix.json" in err.value.message and "trials" in err.value.message


def test_a_matrix_written_with_fewer_fields_still_reads(tmp_path: Path) -> None:
    (tmp_path / "matrix.json").write_text(json.dumps(
        {"baseline_cell": "a", "cells": [{"cell": "a", "trials": 2, "failure_rate": None}]}))
    matrix = read_matrix(tmp_path)
    cell = matrix.cell("a")
    assert cell is not None and cell.stats.trials == 2 and cell.stats.failure_rate is None
    assert matrix.devices is None and matrix.trials == ()
    assert matrix.generated_at is None  # not recorded: never read as 0.0 (1970)


def test_a_confound_band_without_two_ends_is_a_located_exit_2(tmp_path: Path) -> None:
    (tmp_path / "matrix.json").write_text(json.dumps({"confound_band": [0.9]}))
    with pytest.raises(UsageError, match="confound_band: expected two numbers"):
        read_matrix(tmp_path)


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
_figure = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=32))
_small = st.dictionaries(_names, st.one_of(st.none(), st.booleans(), _names,
                                           st.integers(-5, 5)), max_size=3)


@st.composite
def _cells(draw: st.DrawFn) -> MatrixCell:
    stats = CellStats(
        cell=draw(_names), trials=draw(st.integers(0, 99)), passed=draw(st.integers(0, 9)),
        failed=draw(st.integers(0, 9)), errored=draw(st.integers(0, 9)),
        failure_rate=draw(_figure), error_rate=draw(_figure),
        step_time=draw(st.dictionaries(st.sampled_from(["mean", "p50", "p99"]), _figure)),
        step_count=draw(st.one_of(st.none(), st.integers(0, 999))),
        step_time_source=draw(st.sampled_from(["workload", "trial_wall", "none"])),
        top_detectors=draw(st.lists(st.tuples(_names, st.integers(1, 9)), max_size=3)),
        noise=draw(_small), confound=draw(_small),
        cross_trial_failures=draw(st.lists(_small, max_size=2)),
    )
    return MatrixCell(stats, tuple(draw(st.lists(_names, max_size=3))), draw(_names),
                      draw(st.dictionaries(_names, _names, max_size=2)), draw(_small))


@st.composite
def _matrices(draw: st.DrawFn) -> Matrix:
    threshold = draw(st.one_of(st.none(), st.floats(1.01, 3.0)))
    return Matrix(
        aorta_tui_version=draw(_names), generated_at=draw(st.one_of(st.none(), st.floats(0, 2e9))),
        run_dir=draw(_names), run_id=draw(_names), ticket=draw(st.one_of(st.none(), _names)),
        mode=draw(st.sampled_from(["triage", "probe"])), workload=draw(st.one_of(st.none(), _names)),
        command=tuple(draw(st.lists(_names, max_size=3))), status=draw(_names),
        trials_planned=draw(st.integers(0, 99)), trials_finished=draw(st.integers(0, 99)),
        order=draw(st.sampled_from(["interleaved", "sequential"])),
        seed=draw(st.one_of(st.none(), st.integers(0, 2**31))),
        baseline_cell=draw(st.one_of(st.none(), _names)), confound_threshold=threshold,
        confound_band=None if threshold is None else (1 / threshold, threshold),
        devices=draw(st.one_of(st.none(), st.builds(
            Devices, st.dictionaries(_names, st.integers(0, 9), max_size=2),
            st.one_of(st.none(), st.lists(_names, max_size=2).map(tuple))))),
        cells=tuple(draw(st.lists(_cells(), max_size=3))),
        trials=tuple(draw(st.lists(st.builds(
            MatrixTrial, _names, _names, st.integers(0, 9), st.sampled_from(["pass", "fail"]),
            st.lists(_names, max_size=2).map(tuple), _figure), max_size=3))),
        snapshots=draw(_small), warnings=tuple(draw(st.lists(_names, max_size=2))),
        hint=draw(st.text(max_size=10)), collectors=draw(st.one_of(st.none(), _small.filter(bool))),
    )


@given(_matrices())
def test_any_matrix_round_trips_through_its_file_form(matrix: Matrix) -> None:
    text = json.dumps(matrix.to_json())
    again = Matrix.from_json(json.loads(text))
    assert again == matrix
    assert json.dumps(again.to_json()) == text
