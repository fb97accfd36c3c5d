"""Issue 37 item 5: a prepared zygote does not outlive its SIGKILLed orchestrator.

The default isolation prepares a zygote per trial ahead of time (trial/prepared.py); each one
imports the workload's modules (torch: 2-10 s) before it reads its socket. A SIGKILLed
orchestrator's zygotes ran on through those imports, 2-10 s into the resume. Now a zygote
leaves the moment its orchestrator's end of the socket closes, imports or not.

A real orchestrator process (the engine's own ``start_zygote``, as the sweep calls it) starts a
real zygote whose workload module takes two minutes to import, and is SIGKILLed; the zygote must
be gone long before that import could have ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.engine_support import REPO, process_alive

ORCHESTRATOR = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from aorta_tui.trial.warm import start_zygote

    plug = Path(sys.argv[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plug), os.environ.get("PYTHONPATH", "")])}
    z = start_zygote(("slow",), env, ["slow_import_t"], plug, plug / "zygote.log", run_dir=plug,
                     with_torch=False)
    print(z.proc.pid, flush=True)
    time.sleep(600)
""")



def test_a_zygote_still_importing_leaves_with_its_killed_orchestrator(tmp_path: Path,
                                                                      attack_tally) -> None:
    (tmp_path / "slow_import_t.py").write_text(
        "import pathlib, time\n"
        "pathlib.Path(__file__).with_name('importing').touch()\n"
        "time.sleep(120)  # a workload's imports, made long\n")
    orch = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert orch.stdout is not None
    zygote = int(orch.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "importing").exists():
            assert time.monotonic() < deadline and process_alive(zygote), "the zygote never imported"
            time.sleep(0.05)
        orch.send_signal(signal.SIGKILL)
        orch.wait()
        # far less than the 120 s import: the zygote left because its orchestrator died
        deadline = time.monotonic() + 20
        while process_alive(zygote) and time.monotonic() < deadline:
            time.sleep(0.05)
        outlived = process_alive(zygote)
        attack_tally.record("prepared zygotes of a SIGKILLed orchestrator", cases=1,
                            failures=int(outlived), promise="gone with it, mid-import")
        assert not outlived, "the zygote outlived its SIGKILLed orchestrator"
    finally:
        orch.kill()
        orch.wait()
        if process_alive(zygote):
            os.kill(zygote, signal.SIGKILL)
