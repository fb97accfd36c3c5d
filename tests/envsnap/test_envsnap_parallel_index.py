"""``env probe`` lists the installed distributions once (python_env.DistIndex) instead of parsing
every distribution's METADATA twice through importlib.metadata, and loses no field doing it.

The old capture is the snapshot taken with the previous ``capture_python`` (importlib.metadata
over every distribution, kept here verbatim as the reference); the new one is today's. Both are
real captures of this box.
"""

from __future__ import annotations

import os
import re
import string
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.capture import capture_snapshot, python_env
from aorta_tui.envsnap.schema import iter_leaves

_NEW_CAPTURE_PYTHON = python_env.capture_python


def old_capture_python() -> dict[str, object]:
    """The capture_python before the index (reference semantics)."""
    installed: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") if dist.metadata else None
        if name:
            installed.setdefault(python_env._norm(name), dist.version)
    out = _NEW_CAPTURE_PYTHON()  # the other fields; packages replaced below
    out["packages"] = {
        name: F.ok(installed[python_env._norm(name)], "api:importlib.metadata")
        if python_env._norm(name) in installed else F.ok(None, "api:importlib.metadata (not installed)")
        for name in python_env.PACKAGES
    }
    return out


# leaves whose value changes between two captures a second apart
VOLATILE = re.compile(r"^(probe\.|host\.(uptime|load|memory_available|boot)|torch\.import_seconds)")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_old_and_new_capture_have_the_same_fields_and_values(monkeypatch):
    new = capture_snapshot(timeout_s=60).to_json()
    monkeypatch.setattr(python_env, "capture_python", old_capture_python)
    old = capture_snapshot(timeout_s=60).to_json()
    new_leaves, old_leaves = dict(iter_leaves(new)), dict(iter_leaves(old))
    assert set(new_leaves) == set(old_leaves)
    assert len(new_leaves) > 100
    differ = [p for p in new_leaves if not VOLATILE.match(p)
              and (new_leaves[p].get("value"), new_leaves[p]["state"])
              != (old_leaves[p].get("value"), old_leaves[p]["state"])]
    # host counters (free memory, ...) may move; the python and torch sections never do
    assert not [p for p in differ if p.startswith(("python.", "torch.", "env_vars."))], differ
    assert new["python"] == old["python"]


def test_the_index_agrees_with_importlib_metadata_on_every_installed_distribution():
    index = python_env.DistIndex()
    reference: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") if dist.metadata else None
        if name:
            reference.setdefault(python_env._norm(name), dist.version)
    assert reference, "this box has installed distributions"
    assert {k: index.version(k) for k in reference} == reference
    assert set(index.files) | set(index.versions) == set(reference)


def test_the_probe_reads_metadata_only_of_the_packages_it_reports(monkeypatch, tmp_path):
    for i in range(300):
        d = tmp_path / f"pkg{i}-1.{i}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pkg{i}\nVersion: 1.{i}\n\nbody\n")
    (tmp_path / "numpy-9.9.dist-info").mkdir()
    (tmp_path / "numpy-9.9.dist-info" / "METADATA").write_text("Name: numpy\nVersion: 9.9\n")
    reads: list[str] = []
    real = python_env._header
    monkeypatch.setattr(python_env, "_header", lambda p, f: reads.append(p) or real(p, f))
    out = python_env.capture_python(python_env.DistIndex([str(tmp_path)]))
    assert out["packages"]["numpy"]["value"] == "9.9"
    assert out["packages"]["torch"]["value"] is None
    assert len(reads) == 1  # numpy's; never one per installed distribution


_name = st.text(string.ascii_letters + string.digits, min_size=1, max_size=8).map(lambda s: "a" + s)
_version = st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,3}){0,3}(\+[a-z0-9]{1,5})?\Z")
_sep = st.sampled_from(["_", "-", ".", "__"])


@st.composite
def site_dirs(draw: st.DrawFn) -> list[tuple[str, str, str, str]]:
    n = draw(st.integers(1, 8))
    out = []
    for _ in range(n):
        parts = draw(st.lists(_name, min_size=1, max_size=3))
        meta_name = draw(_sep).join(parts)
        kind = draw(st.sampled_from(["dist-info", "egg-info-dir", "egg-info-file"]))
        out.append((meta_name, draw(_version), kind, draw(st.sampled_from(["", "Summary: x\n"]))))
    return out


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dists=site_dirs())
def test_index_matches_importlib_metadata_on_generated_site_dirs(tmp_path_factory, dists, attack_tally):
    site = tmp_path_factory.mktemp("site")
    for meta_name, version, kind, extra in dists:
        escaped = re.sub(r"[-_.]+", "_", meta_name)
        header = f"Metadata-Version: 2.1\nName: {meta_name}\n{extra}Version: {version}\n\nbody: x\n"
        if kind == "dist-info":
            d = site / f"{escaped}-{version}.dist-info"
            d.mkdir(exist_ok=True)
            (d / "METADATA").write_text(header)
        elif kind == "egg-info-dir":
            d = site / f"{escaped}-{version}-py3.11.egg-info"
            d.mkdir(exist_ok=True)
            (d / "PKG-INFO").write_text(header)
        else:
            (site / f"{escaped}-{version}.egg-info").write_text(header)
    reference: dict[str, str] = {}
    for dist in metadata.distributions(path=[str(site)]):
        name = dist.metadata.get("Name") if dist.metadata else None
        if name:
            reference.setdefault(python_env._norm(name), dist.version)
    index = python_env.DistIndex([str(site)])
    got = {k: index.version(k) for k in reference}
    ok = got == reference and set(index.files) == set(reference)
    attack_tally.record("envsnap dist index vs importlib.metadata", cases=1, failures=0 if ok else 1,
                        promise="same names and versions as importlib.metadata")
    assert ok, (got, reference, index.files, os.listdir(site), [d._path.name for d in metadata.distributions(path=[str(site)])])


def test_a_path_entry_that_is_a_zip_is_asked_through_importlib(tmp_path):
    import zipfile

    z = tmp_path / "bundle.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("zpkg-2.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zpkg\nVersion: 2.0\n\n")
    index = python_env.DistIndex([str(z), str(Path(tmp_path / "missing"))])
    assert index.version("zpkg") == "2.0"
    assert index.version("nothing") is None
