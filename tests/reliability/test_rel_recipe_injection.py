"""Issue 12, items 2 and 3: nothing from a recipe or a sidecar reaches a shell or docker's options.

- a sidecar variable name such as ``X;touch /tmp/PWN;Y`` is refused (located, exit 2), and
  ``probe.env`` quotes every value: sourcing it runs nothing;
- a docker image such as ``--privileged`` is refused, and the trial argv ends docker's options
  with ``--`` before the image (checked against the real docker CLI's parser where installed).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.recipe import check_recipe_text
from aorta_tui.recipe.checks import docker_image_problem
from aorta_tui.registry.registry import Registry, load_sidecar_mitigations
from tests.engine_support import aorta, only_run_dir

PROBE = ("schema_version: 1\nmode: probe\ntrials: 1\nenv_passthrough_mode: file\n"
         "mitigation_axis: [none, evil]\ndiagnostic_axis: [none]\n")


@pytest.mark.parametrize("sidecar", [
    [{"name": "evil", "env": {"X;touch /tmp/PWN;Y": "1"}}],
    {"evil": {"env": {"X;touch /tmp/PWN;Y": "1"}}},
    {"evil": {"env": {"A B": "1"}}},
    {"evil": {"env": {"1X": "1"}}},
    {"evil": {"env": {"X=Y": "1"}}},
    {"evil": {"env": {"X": "a\u0000b"}}},
    {"evil": {"env": {"X": 1}}},
    {"evil; rm -rf ~": {"env": {"X": "1"}}},
])
def test_bad_sidecar_entries_are_refused_with_a_location(tmp_path, sidecar):
    side = tmp_path / "evil.json"
    side.write_text(json.dumps(sidecar))
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE)
    marker = Path("/tmp/PWN")
    marker.unlink(missing_ok=True)
    proc = aorta("recipe", "validate", str(recipe), "--mitigations-file", str(side))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"{side}" in proc.stderr and "evil" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    proc = aorta("--batch", str(recipe), "--mitigations-file", str(side), "--output",
                 str(tmp_path / "out"), "--no-snapshot", "--", "bash", "-c",
                 'source "$AORTA_ENV_FILE"')
    assert proc.returncode == 2 and not marker.exists()


def test_the_name_error_points_at_the_line_of_the_name(tmp_path):
    side = tmp_path / "m.json"
    side.write_text('{\n  "ok": {"env": {"A": "1"}},\n  "evil": {"env": {"X;touch /tmp/PWN;Y": "1"}}\n}\n')
    with pytest.raises(UsageError) as info:
        load_sidecar_mitigations(side)
    assert info.value.message.startswith(f"{side}:3:20: entry evil: env: ")


def test_sidecars_are_read_through_the_bounded_reader(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="FIFO"):
        load_sidecar_mitigations(fifo)  # would block forever in open() before
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000)
    with pytest.raises(UsageError):
        load_sidecar_mitigations(deep)
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(5 * 1024 * 1024)
    with pytest.raises(UsageError, match="limit"):
        load_sidecar_mitigations(big)
    unknown = tmp_path / "switch.json"
    unknown.write_text('{"m": {"switches": ["torch.nope"]}}')
    with pytest.raises(UsageError, match="unknown switch"):
        load_sidecar_mitigations(unknown)


def test_probe_env_quotes_hostile_values_and_is_0600(tmp_path):
    """Values full of shell syntax come back byte for byte; sourcing runs none of it."""
    marker = tmp_path / "pwned"
    hostile = f"'; touch {marker}; echo '$(touch {marker})`touch {marker}`\"\n\\ $HOME"
    side = tmp_path / "m.json"
    side.write_text(json.dumps({"evil": {"env": {"HOSTILE": hostile}}}))
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE)
    out = tmp_path / "out"
    got = tmp_path / "got"
    script = f'env -i bash -c \'. "$0"; printf %s "$HOSTILE" > "{got}"\' "$AORTA_ENV_FILE"'
    proc = aorta("--batch", str(recipe), "--mitigations-file", str(side), "--output", str(out),
                 "--no-snapshot", "--", "bash", "-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not marker.exists()
    assert got.read_text() == hostile
    env_file = only_run_dir(out) / "trials" / "evil-none" / "trial-000" / "probe.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600


# -- item 3: docker images ---------------------------------------------------------------------
TRIAGE = ("schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\n"
          "cells: [{{name: a, mitigations: [none], environment: {{docker: {image}}}}}]\n")


@pytest.mark.parametrize("image", ["--privileged", "--volume=/:/host", "-v/:/host", "a b",
                                   "alpine;id", "", "x" * 600, "Alpine:latest:x"])
def test_hostile_images_are_refused_by_validation(image):
    issues = check_recipe_text(TRIAGE.format(image=json.dumps(image)))
    assert [i.path for i in issues] == ["cells[0].environment.docker"], issues
    assert issues[0].line == 5 and len(issues[0].message) < 200


@pytest.mark.parametrize("image", ["alpine", "rocm/pytorch:latest", "localhost:5000/a/b:1.0",
                                   "ghcr.io/org/img_x-y.z:v1.2-rc", "nvcr.io/nvidia/pytorch:24.05-py3",
                                   "alpine@sha256:" + "a" * 64])
def test_real_images_are_accepted(image):
    assert docker_image_problem(image) is None
    assert check_recipe_text(TRIAGE.format(image=json.dumps(image))) == []


def test_cli_validate_refuses_the_privileged_image(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(TRIAGE.format(image='"--privileged"'))
    proc = aorta("recipe", "validate", str(f))
    assert proc.returncode == 2 and f"{f}:5:" in proc.stderr and "option" in proc.stderr


def _fake_docker(bindir: Path, log: Path) -> None:
    """A `docker` that answers `info` and records each `run`'s argv and environment."""
    bindir.mkdir()
    script = bindir / "docker"
    script.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        "if sys.argv[1:2] == ['info']:\n    print('28.0'); sys.exit(0)\n"
        f"open({str(log)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], "
        "'secret': os.environ.get('HF_TOKEN')}) + '\\n')\n")
    script.chmod(0o755)


def test_trial_argv_puts_the_image_after_double_dash_and_no_values(tmp_path):
    log = tmp_path / "docker.log"
    _fake_docker(tmp_path / "bin", log)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TRIAGE.format(image="rocm/pytorch:latest").replace(
        "environment: {docker: rocm/pytorch:latest}",
        "environment: {docker: rocm/pytorch:latest, env: {HF_TOKEN: hf_SECRET123}}"))
    out = tmp_path / "out"
    proc = aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot",
                 env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert log.is_file(), proc.stderr[-2000:]
    call = json.loads(log.read_text().splitlines()[0])
    argv = call["argv"]
    assert argv[0] == "run"
    dd = argv.index("--")
    assert argv[dd + 1] == "rocm/pytorch:latest"
    assert "-e" in argv[:dd] and argv[argv.index("-e") + 1] == "HF_TOKEN"
    assert not any("hf_SECRET123" in a for a in argv)  # no value on the command line
    assert call["secret"] == "hf_SECRET123"  # docker reads it from its environment


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker CLI here")
def test_the_real_docker_cli_reads_the_word_after_double_dash_as_the_image(tmp_path):
    """docker run parses its options before contacting a daemon: with `--`, an option-looking
    word is an (invalid) image, not --privileged."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    run = ["docker", "run", "--rm", "-e", "X", "-v", f"{tmp_path}:{tmp_path}", "--"]
    bad = subprocess.run([*run, "--privileged", "true"], capture_output=True, text=True, env=env,
                         timeout=30)
    assert "invalid reference format" in bad.stderr, bad.stderr
    good = subprocess.run([*run, "alpine", "true"], capture_output=True, text=True, env=env,
                          timeout=30)
    assert "invalid reference format" not in good.stderr and "Cannot connect" in good.stderr


def test_a_plugin_environment_with_a_hostile_image_is_refused_by_the_plan():
    from aorta_tui.recipe import load_recipe_text
    from aorta_tui.registry.registry import Environment
    from aorta_tui.sweep.plan import build_plan

    reg = Registry()
    reg.environments["evil"] = Environment("evil", docker="--privileged", source="plugin")
    recipe = load_recipe_text("schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\n"
                              "cells: [{name: a, mitigations: [none], environment: evil}]\n",
                              registry=reg)
    with pytest.raises(UsageError, match="option"):
        build_plan(recipe, reg)
