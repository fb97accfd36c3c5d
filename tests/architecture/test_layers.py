"""Import rules: the engine never imports UI libraries; --help never pays for torch."""

from __future__ import annotations

import json
import subprocess
import sys

ENGINE = ["aorta_tui.sweep.orchestrator", "aorta_tui.recipe", "aorta_tui.registry.registry",
          # run_store imports every other store module but these two
          "aorta_tui.store.run_store", "aorta_tui.store.run_list", "aorta_tui.store.run_meta",
          "aorta_tui.relay.launch", "aorta_tui.trial.worker"]


def modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_engine_imports_no_ui_and_no_torch():
    mods = modules_after("\n".join(f"import {m}" for m in ENGINE))
    assert not {m for m in mods if m.split(".")[0] in ("textual", "rich", "torch")}


def test_cli_help_and_batch_entry_import_no_torch_textual_or_rich():
    mods = modules_after(
        "import sys\nsys.argv = ['aorta-tui', '--help']\nfrom aorta_tui.cli import main\n"
        "try:\n    main.run()\nexcept SystemExit:\n    pass"
    )
    assert "aorta_tui.cli.main" in mods
    assert not {m for m in mods if m.split(".")[0] in ("textual", "torch", "rich")}
