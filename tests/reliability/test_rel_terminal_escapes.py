"""Issue 37 item 9: escape sequences from files never reach the terminal raw.

A snapshot or a journal is a file anyone who can write it controls. ``env diff`` printed a
hostile snapshot's values and keys as they were, and ``attach --plain`` a journal's warning
message and detector ids: an OSC sequence retitled the terminal, a CSI one cleared it, a bidi
override reordered what the reader saw. Both now go through the one sanitiser
(``core/text.inert``), which the TUI's log view uses too. The real CLI; ``env diff`` both as
plain text (a pipe) and through rich on a real pseudo-terminal (``script``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine_support import REPO, aorta, only_run_dir

# What an attacker writes: a window title (OSC 0), a screen clear (CSI 2J), the 8-bit CSI,
# a right-to-left override, a line break and a carriage return that overwrite the line.
HOSTILE = ["\x1b]0;pwned\x07", "\x1b[2J", "\x9b2J", "\u202e", "\u2066", "\r", "\x1b]52;c;Zm9v\x07"]
PAYLOAD = "evil" + "".join(HOSTILE) + "end"


def _raw_escapes(text: str) -> list[str]:
    return [h for h in HOSTILE if h in text and h != "\r"] + (
        ["\\r raw"] if "\rend" in text else [])


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("snaps")
    a = root / "a.json"
    subprocess.run([sys.executable, "-m", "aorta_tui.envsnap", "--output", str(a), "--no-torch"],
                   check=True, cwd=REPO, timeout=120, capture_output=True)
    snap = json.loads(a.read_text())
    name = next(iter(snap["env_vars"]))
    snap["env_vars"][name] = {**snap["env_vars"][name], "set": True, "value": PAYLOAD}
    snap["env_vars"][f"EVIL{PAYLOAD}"] = {"category": "launch", "set": True, "state": "ok",
                                          "source": "env:EVIL", "value": PAYLOAD}
    b = root / "b.json"
    b.write_text(json.dumps(snap))
    return a, b


def test_env_diff_shows_a_hostile_snapshots_escapes_never_obeys_them(
        snapshots: tuple[Path, Path], attack_tally) -> None:
    a, b = snapshots
    res = aorta("env", "diff", str(a), str(b))
    assert res.returncode in (0, 1), res.stderr
    raw = _raw_escapes(res.stdout + res.stderr)
    attack_tally.record("escapes from files (env diff, attach --plain)", cases=1,
                        failures=int(bool(raw)), promise="shown as \\x1b..., never obeyed")
    assert not raw, raw
    assert "\\x1b]0;pwned" in res.stdout and "\\u202e" in res.stdout  # shown, not dropped
    assert "EVILevil\\x1b" in res.stdout  # the key too


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a terminal")
def test_env_diff_on_a_terminal_shows_the_escapes_too(snapshots: tuple[Path, Path],
                                                       tmp_path: Path, attack_tally) -> None:
    """On a terminal the diff is drawn by rich, which passes control characters through."""
    a, b = snapshots
    typescript = tmp_path / "typescript"
    cmd = f"{sys.executable} -m aorta_tui env diff {a} {b}"
    subprocess.run(["script", "-qec", cmd, str(typescript)], cwd=REPO, timeout=120,
                   capture_output=True, env={"PATH": "/usr/bin:/bin", "TERM": "xterm",
                                             "COLUMNS": "400", "PYTHONPATH": str(REPO)})
    text = typescript.read_bytes().decode("utf-8", "replace")
    raw = [h for h in ("\x1b]0;pwned", "\x1b[2J", "\u202e", "\u2066", "\x1b]52") if h in text]
    attack_tally.record("escapes from files (env diff, attach --plain)", cases=1,
                        failures=int(bool(raw)), promise="shown as \\x1b..., never obeyed")
    assert not raw, raw
    assert "pwned" in text  # the diff was drawn (escaped)


def test_attach_plain_shows_a_journals_escapes_never_obeys_them(tmp_path: Path,
                                                                attack_tally) -> None:
    (tmp_path / "probe.yaml").write_text(
        "schema_version: 1\nmode: probe\nticket: ESC\ntrials: 1\nmitigation_axis: [none]\n"
        "diagnostic_axis: [none]\n")
    res = aorta("--batch", "probe.yaml", "--no-snapshot", "--", "true", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    run_dir = only_run_dir(tmp_path / "aorta-out")
    journal = run_dir / "journal.jsonl"
    lines = [json.loads(x) for x in journal.read_text().splitlines()]
    finished = next(e for e in lines if e["event"] == "trial_finished")
    forged = [{"event": "warning", "run_id": finished["run_id"], "ts": finished["ts"],
               "message": f"disk {PAYLOAD}", "code": "x"},
              {**finished, "verdict": "fail", "detectors": [f"tier4:{PAYLOAD}"],
               "reason": PAYLOAD}]
    end = next(i for i, e in enumerate(lines) if e["event"] == "run_finished")
    lines[end:end] = forged
    journal.write_text("".join(json.dumps(e) + "\n" for e in lines))
    att = aorta("attach", "--plain", str(run_dir), cwd=tmp_path)
    raw = _raw_escapes(att.stdout + att.stderr)
    attack_tally.record("escapes from files (env diff, attach --plain)", cases=1,
                        failures=int(bool(raw)), promise="shown as \\x1b..., never obeyed")
    assert not raw, (raw, att.stdout[-1500:])
    assert "warning: disk evil\\x1b]0;pwned" in att.stdout, att.stdout
    assert "tier4:evil\\x1b" in att.stdout or "evil\\x1b[2J" in att.stdout, att.stdout


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_the_one_sanitiser_leaves_nothing_a_terminal_obeys(attack_tally, text: str) -> None:
    import unicodedata

    from aorta_tui.core.text import inert

    shown = inert(text)

    # a space of another width (NBSP, Zs) is text; control, format and separator characters
    # are what a terminal acts on
    bad = [ch for ch in shown
           if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")]
    ok = not bad and (text == shown or "\\" in shown)
    attack_tally.record("one terminal sanitiser (hypothesis)", cases=1, failures=int(not ok),
                        promise="no control, format or separator character survives")
    assert ok, (text, shown)


def test_env_summary_shows_a_hostile_snapshots_escapes_never_obeys_them(
        snapshots: tuple[Path, Path], tmp_path: Path, attack_tally) -> None:
    a, _b = snapshots
    snap = json.loads(a.read_text())
    snap["host"]["cpu_model"] = {"source": "x", "state": "ok", "value": PAYLOAD}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(snap))
    res = aorta("env", "summary", str(bad))
    raw = _raw_escapes(res.stdout + res.stderr)
    attack_tally.record("escapes from files (env diff, attach --plain)", cases=1,
                        failures=int(bool(raw)), promise="shown as \\x1b..., never obeyed")
    assert res.returncode == 0 and not raw, (raw, res.stderr[-500:])
    assert "evil\\x1b]0;pwned" in res.stdout
