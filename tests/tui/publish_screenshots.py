"""Copy the accepted SVG snapshots of the TUI tests to docs/screenshots/ (for README/docs).

    pytest tests/tui/test_tui_snapshots.py --snapshot-update && python tests/tui/publish_screenshots.py
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "__snapshots__" / "test_tui_snapshots"
TARGET = HERE.parents[1] / "docs" / "screenshots"


def published_name(snapshot: Path) -> str:
    """test_env_diff[80x24].svg -> env-diff-80x24.svg; test_matrix_live_run.svg -> matrix-live-run.svg"""
    stem = snapshot.stem.removeprefix("test_")
    match = re.fullmatch(r"(.*)\[(.*)\]", stem)
    name, size = (match.group(1), match.group(2)) if match else (stem, "")
    return "-".join(p for p in (name.replace("_", "-"), size) if p) + ".svg"


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    for snapshot in sorted(SOURCE.glob("*.svg")):
        shutil.copyfile(snapshot, TARGET / published_name(snapshot))
        print(TARGET / published_name(snapshot))


if __name__ == "__main__":
    main()
