"""The matrix's `b`: a real run's bundle review (masked, nothing written), then `w` writes the
archive in the TUI's working directory with no planted secret in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tui_support import FIXED_FACTS, async_test, wait_for

from aorta_tui.core.secrets import SECRET_HASHES_FILE
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.bundle_review import BundleReviewScreen
from aorta_tui.tui.screens.matrix import MatrixScreen

TOKEN = "hf_TUIplantedTok3n77"
RECIPE = """\
schema_version: 1
mode: probe
ticket: T-TUIBUNDLE
trials: 1
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("tui-bundle")
    (base / "probe.yaml").write_text(RECIPE)
    env = {**os.environ, "HF_TOKEN": TOKEN}
    # the default relative output directory, as a user runs it
    subprocess.run([sys.executable, "-m", "aorta_tui", "--batch", "probe.yaml", "--",
                    "sh", "-c", 'echo "HF_TOKEN=$HF_TOKEN"; echo "token again $HF_TOKEN"'],
                   check=True, capture_output=True, cwd=base, env=env, timeout=120)
    (run,) = [p for p in (base / "aorta-out" / "T-TUIBUNDLE").iterdir() if p.is_dir()]
    everything = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())
    assert TOKEN.encode() in everything  # or the test proves nothing
    return run


def _app(cwd: Path, run_dir: Path) -> AortaApp:
    return AortaApp(cwd=cwd, output_dir=cwd / "aorta-out", start_run=run_dir, machine_facts=FIXED_FACTS)


async def _open(pilot, app: AortaApp) -> None:  # noqa: ANN001
    matrix = app.screen
    assert isinstance(matrix, MatrixScreen)
    await wait_for(pilot, lambda: matrix.state is not None and matrix.state.status == "completed",
                   what="the run loaded")
    await pilot.press("b")
    await wait_for(pilot, lambda: isinstance(app.screen, BundleReviewScreen), what="the review dialog")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", [(80, 24), (140, 44)], ids=lambda s: f"{s[0]}x{s[1]}")
@async_test
async def test_b_reviews_masked_and_w_writes_a_clean_archive(run_dir: Path, tmp_path: Path, size) -> None:
    app = _app(tmp_path, run_dir)
    async with app.run_test(size=size) as pilot:
        await _open(pilot, app)
        review = app.screen
        assert isinstance(review, BundleReviewScreen)
        await wait_for(pilot, lambda: review.reviewed is not None, timeout=30, what="the review")
        assert review.reviewed.error is None
        rows = review.reviewed.rows
        # the CLI's `bundle --review` of this run: line 1 by the variable's name, line 2 by its value
        assert sorted((r.rule, r.where.rsplit("/", 1)[-1]) for r in rows) == [
            ("secret_env", "stdout.log:1"), ("secret_value", "stdout.log:2")]
        assert all(r.after == "<redacted:secret>" and TOKEN not in r.before for r in rows)
        assert review.query_one("#bundle-table").row_count == len(rows)
        assert not list(tmp_path.glob("*.tar.gz")), "the review wrote something"
        screen_text = "\n".join(str(w.render()) for w in review.query("#bundle-summary"))
        files = sum(1 for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()
                    and p.name != SECRET_HASHES_FILE)  # the keys to the secrets never travel
        assert f"{len(rows)} redactions in 1 of {files} files would be made" in screen_text, screen_text

        await pilot.press("w")
        await wait_for(pilot, lambda: review.written is not None, timeout=30, what="the archive")
        assert review.written.error is None, review.written.error
        archive = tmp_path / f"{run_dir.name}.bundle.tar.gz"
        assert archive.is_file()
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            blobs = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
        assert any(n.endswith("MANIFEST.json") for n in names)
        assert all(TOKEN.encode() not in b for b in blobs)
        manifest = json.loads(next(b for n, b in zip(
            [n for n in names if not n.endswith("/")], blobs, strict=False) if n.endswith("MANIFEST.json")))
        assert manifest["totals"]["redacted_files"] >= 1

        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), what="back on the matrix")


@async_test
async def test_b_without_a_run_says_so(tmp_path: Path) -> None:
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "aorta-out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_goto("matrix")
        await pilot.pause(0.2)
        assert isinstance(app.screen, MatrixScreen)
        await pilot.press("b")
        await pilot.pause(0.2)
        assert isinstance(app.screen, MatrixScreen)  # nothing pushed
        assert any("no run open" in n.message for n in app._notifications)


@async_test
async def test_w_into_an_unwritable_directory_is_a_located_error_and_writes_nothing(
        run_dir: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "ro"
    cwd.mkdir()
    app = _app(cwd, run_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(pilot, app)
        review = app.screen
        await wait_for(pilot, lambda: review.reviewed is not None, timeout=30, what="the review")
        cwd.rmdir()  # the directory the archive would go in is gone
        await pilot.press("w")
        await wait_for(pilot, lambda: review.written is not None, timeout=30, what="the answer")
        assert review.written.error is not None and "does not exist" in review.written.error
        assert "fix:" in review.written.error
        assert not cwd.exists()


@async_test
async def test_the_keys_say_when_w_replaces_an_archive_there(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / f"{run_dir.name}.bundle.tar.gz").write_bytes(b"an older one")
    app = _app(tmp_path, run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        review = app.screen
        assert isinstance(review, BundleReviewScreen)
        # looked for by the review's worker (compose never waits on the disk)
        await wait_for(pilot, lambda: review.reviewed is not None, timeout=30, what="the review")
        assert "replaces the one there" in str(review.query_one("#bundle-keys").render())
