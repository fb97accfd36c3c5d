"""cli/common.check_output_file's folder check: ``-o`` in a folder this user cannot write, or
under one it cannot search, is refused before any work (exit 3), naming the nearest path the
user can see; it climbs from the file to that path once (the refusal's message climbs no more).

The tests run as root, so the refusals are simulated: ``os.stat`` raises EACCES below a folder
"only root can search", ``os.access`` says no for a folder "only root can write". The real
thing, as a second user under sudo: tests/privsep/test_privsep_trace.py."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from aorta_tui.cli.common import check_output_file
from aorta_tui.core.errors import EnvironmentProblem


def _as_a_user(monkeypatch: pytest.MonkeyPatch, *, unsearchable: Path | None = None,
               unwritable: Path | None = None) -> Counter[str]:
    """Deny what a user would be denied; count the stats of each path."""
    stats: Counter[str] = Counter()
    real_stat, real_access = os.stat, os.access

    def stat(path: os.PathLike[str] | str | int, *args: object, **kwargs: object) -> os.stat_result:
        if not isinstance(path, int):
            stats[os.fspath(path)] += 1
            where = Path(os.path.abspath(path))  # what the kernel would look up, from the cwd
            if unsearchable is not None and where.is_relative_to(unsearchable) and where != unsearchable:
                raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    def access(path: os.PathLike[str] | str, mode: int, *args: object, **kwargs: object) -> bool:
        if unwritable is not None and Path(os.path.abspath(path)) == unwritable and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "access", access)
    return stats


def test_an_output_under_a_folder_the_user_cannot_search_names_it_after_one_climb(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    (locked / "out").mkdir(parents=True)
    target = locked / "out" / "deeper" / "trace.json"
    stats = _as_a_user(monkeypatch, unsearchable=locked)
    with pytest.raises(EnvironmentProblem) as refused:
        check_output_file(target)
    assert f"cannot write {target}: permission denied ({locked} belongs to " in str(refused.value)
    assert "chown -R" in refused.value.hint and f" {locked}`" in refused.value.hint  # what to take over
    below = [target, target.parent, locked / "out"]  # what the climb passes on its way to locked
    assert {str(p): stats[str(p)] for p in below} == {str(p): 1 for p in below}, "the folders were climbed twice"


def test_an_output_in_a_folder_the_user_cannot_write_names_it_after_one_climb(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root_only = tmp_path / "root-only"
    root_only.mkdir()
    target = root_only / "sub" / "q.json"  # sub is made by the writer: root_only is where it writes
    stats = _as_a_user(monkeypatch, unwritable=root_only)
    with pytest.raises(EnvironmentProblem) as refused:
        check_output_file(target)
    assert f"cannot write {target}: permission denied ({root_only} belongs to " in str(refused.value)
    below = [target, target.parent]
    assert {str(p): stats[str(p)] for p in below} == {str(p): 1 for p in below}, "the folders were climbed twice"


def test_an_existing_file_in_a_folder_the_user_cannot_write_is_named_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "q.json").write_text("{}")
    _as_a_user(monkeypatch, unwritable=tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EnvironmentProblem) as refused:
        check_output_file("q.json")  # as typed: the message names it so
    assert "cannot write q.json: permission denied (q.json belongs to " in str(refused.value)
    assert "chown -R" in refused.value.hint and refused.value.hint.split("`")[1].endswith(" .")


def test_a_writable_folder_and_the_missing_ones_below_it_pass(tmp_path: Path) -> None:
    check_output_file(tmp_path / "a" / "b" / "q.json")
    check_output_file(tmp_path / "q.json")
    assert list(tmp_path.iterdir()) == []  # nothing made: the writer makes them
