#!/usr/bin/env bash
# The type checker CI runs: mypy over aorta_tui/ with pyproject.toml's [tool.mypy] settings
# (zero errors; the modules it still excludes are listed there), then the count of bare `Any`
# annotations per package (scripts/count_any.py), the number to drive down.
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/mypy
.venv/bin/python scripts/count_any.py aorta_tui
