#!/usr/bin/env bash
# The type checker CI runs: mypy over all of aorta_tui/ with pyproject.toml's [tool.mypy]
# settings (zero errors, no module excluded), then the count of bare `Any` annotations per
# package (scripts/count_any.py), the number to drive down. An error stops the script with
# mypy's exit status (1), before the count: scripts/test.sh (set -e) stops there too.
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/mypy
.venv/bin/python scripts/count_any.py aorta_tui
