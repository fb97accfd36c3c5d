"""Issue 12, item 13: a token in a recipe (or a sidecar) reaches the trial and no file that echoes.

``plan.json``, ``recipe.resolved.yaml``, ``result.json``, ``matrix.json``/``.md``, the journal,
``recipe validate`` and messages show the value masked; the trial's process gets the real one;
the only file holding it is ``probe.env``, mode 0600, when the recipe asks for one.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.core.secrets import MASK, is_secret_name, mask_env
from aorta_tui.recipe.checks import mitigation_env
from aorta_tui.registry.registry import Mitigation
from tests.engine_support import aorta, only_run_dir

TOKEN = "hf_TOPSECRET_4242"
PASSWORD = "pw-TOPSECRET-77"


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUBTOKEN",
                                  "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
                                  "AWS_SESSION_TOKEN", "WANDB_API_KEY", "OPENAI_APIKEY",
                                  "DB_PASSWORD", "AZURE_CLIENT_SECRET", "ngc_api_key",
                                  "GOOGLE_APPLICATION_CREDENTIALS", "MY_PASSPHRASE"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["KEYBOARD", "MONKEY", "NCCL_IB_PKEY", "PWD", "HOME",
                                  "TOKENIZERS_PARALLELISM", "HSA_XNACK", "PYTORCH_CUDA_ALLOC_CONF",
                                  "CUBLAS_WORKSPACE_CONFIG", "SSH_AUTH_SOCK"])
def test_not_secret_names(name):
    assert not is_secret_name(name)


def test_mask_env_keeps_names_and_empty_values():
    assert mask_env({"HF_TOKEN": TOKEN, "N": "1", "API_KEY": ""}) == {
        "HF_TOKEN": MASK, "N": "1", "API_KEY": ""}


def test_conflict_messages_mask_secrets_and_clip_values():
    a = Mitigation("a", {"HF_TOKEN": TOKEN, "BIG": "x" * 4_000_000})
    b = Mitigation("b", {"HF_TOKEN": TOKEN + "2"})
    with pytest.raises(UsageError) as info:
        mitigation_env([a, b])
    assert TOKEN not in info.value.message and MASK in info.value.message
    c = Mitigation("c", {"BIG": "y" * 4_000_000})
    with pytest.raises(UsageError) as info:
        mitigation_env([a, c])
    assert len(info.value.message) < 400


def _everything_written(run_dir: Path) -> dict[str, str]:
    return {p.relative_to(run_dir).as_posix(): p.read_text(errors="replace")
            for p in run_dir.rglob("*") if p.is_file()}


def test_probe_run_gives_the_trial_the_token_and_writes_it_nowhere_else(tmp_path):
    side = tmp_path / "m.json"
    side.write_text(json.dumps({"tok": {"env": {"HF_TOKEN": TOKEN, "NCCL_DEBUG": "INFO"}}}))
    recipe = tmp_path / "probe.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\ntrials: 1\nenv_passthrough_mode: file\n"
                      "mitigation_axis: [tok]\ndiagnostic_axis: [none]\n")
    got = tmp_path / "got"
    out = tmp_path / "out"
    proc = aorta("--batch", str(recipe), "--mitigations-file", str(side), "--output", str(out),
                 "--no-snapshot", "--", "bash", "-c", f'printf %s "$HF_TOKEN" > {got}')
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert got.read_text() == TOKEN  # the trial has the real value
    run = only_run_dir(out)
    files = _everything_written(run)
    holders = sorted(name for name, text in files.items() if TOKEN in text)
    assert holders == ["trials/tok-none/trial-000/probe.env"]
    assert stat.S_IMODE((run / holders[0]).stat().st_mode) == 0o600
    assert TOKEN not in proc.stdout + proc.stderr
    plan = json.loads(files["plan.json"])
    assert plan["cells"][0]["env"] == {"HF_TOKEN": MASK, "NCCL_DEBUG": "INFO"}
    result = json.loads(files["trials/tok-none/trial-000/result.json"])
    assert result["env_overlay"]["HF_TOKEN"] == MASK
    assert json.loads(files["matrix.json"])["cells"][0]["env"]["HF_TOKEN"] == MASK


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_triage_extra_env_is_masked_in_every_file_and_resume_needs_the_recipe(tmp_path):
    recipe = tmp_path / "triage.yaml"
    recipe.write_text(
        "schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\n"
        f"extra_env: {{HF_TOKEN: {TOKEN}}}\n"
        f"cells: [{{name: a, mitigations: [none], extra_env: {{DB_PASSWORD: {PASSWORD}}}}}]\n")
    proc = aorta("recipe", "validate", str(recipe))
    assert proc.returncode == 0 and TOKEN not in proc.stdout and PASSWORD not in proc.stdout
    assert "HF_TOKEN=" + MASK in proc.stdout
    for flags in ([], ["--json"]):
        proc = aorta("--batch", str(recipe), "--dry-run", *flags)
        assert proc.returncode == 0 and MASK in proc.stdout, proc.stderr[-2000:]
        assert TOKEN not in proc.stdout and PASSWORD not in proc.stdout
    out = tmp_path / "out"
    proc = aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = only_run_dir(out)
    files = _everything_written(run)
    for secret in (TOKEN, PASSWORD):
        assert [n for n, text in files.items() if secret in text] == []
    assert MASK in files["recipe.resolved.yaml"] and MASK in files["plan.json"]
    # the resolved recipe lacks the values: running from it alone is refused, located
    proc = aorta("sweep", "run", "--resume", str(run), "--no-snapshot")
    assert proc.returncode == 2 and "HF_TOKEN" in proc.stderr and "--recipe" in proc.stderr
    assert "Traceback" not in proc.stderr
    # with the original recipe the hashes agree (both hash the masked form)
    proc = aorta("sweep", "run", "--resume", str(run), "--recipe", str(recipe), "--no-snapshot",
                 timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_docker_environment_snapshot_masks_its_variables(tmp_path):
    from aorta_tui.core.rundir_fs import RunDirFS
    from aorta_tui.sweep.snapshots import start_captures

    (tmp_path / "env").mkdir()
    with RunDirFS(tmp_path) as fs:
        pending = start_captures(fs, {"docker:img": {"HF_TOKEN": TOKEN, "N": "1"}}, {},
                                 session=2, include_torch=False, docker={"docker:img": "img"})
    written = [p.path for p in pending if p.proc is None]
    assert written and all(TOKEN not in p.read_text() and MASK in p.read_text() for p in written)
