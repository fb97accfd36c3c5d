"""Reading upstream AORTA ``env.json`` files (amd-aorta, schema ``"1.N"``).

Upstream snapshots hold plain values (no state or provenance) in its own layout. Two uses:

* ``leaves``: every scalar (and every list, as one value) becomes a :class:`~doc.Field` with
  state ``ok`` (``unknown`` when null) so two upstream files diff generically;
* ``project``: the fields both tools record, moved to this project's paths (``COMMON``), so
  an upstream file can be compared with an aorta-tui snapshot.

An upstream file is another tool's layout of plain values: it is read as JSON
(``doc.UpstreamSnapshot``), and these functions take its ``data``.
"""

from __future__ import annotations

import re

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import Json
from aorta_tui.envsnap.doc import Field

_VERSION = re.compile(r"^1\.\d+$")
_MARKER_KEYS = ("captured_at", "env_vars", "partial_reasons", "pytorch_version", "rocm")

# upstream dotted path -> aorta-tui path
COMMON: dict[str, str] = {
    "host.kernel_release": "host.kernel_release",
    "host.kernel_version": "host.kernel_version",
    "host.machine": "host.machine",
    "host.glibc_version": "host.glibc",
    "python_version": "python.version",
    "pytorch_version": "torch.version",
    "pytorch_build.git_commit": "torch.git_commit",
    "pytorch_build.cuda_version": "torch.cuda_build_version",
    "pytorch_build.hip_version": "torch.hip_build_version",
    "pytorch_build.debug": "torch.debug_build",
    "pytorch_build.flags.gpu_arch_list": "torch.compiled_arch_list",
    "pytorch_sdpa.backends_enabled.flash_sdp_enabled": "torch.sdpa_flash",
    "pytorch_sdpa.backends_enabled.mem_efficient_sdp_enabled": "torch.sdpa_mem_efficient",
    "pytorch_sdpa.backends_enabled.math_sdp_enabled": "torch.sdpa_math",
    "pytorch_sdpa.backends_enabled.cudnn_sdp_enabled": "torch.sdpa_cudnn",
    "triton.package_version": "python.packages.triton",
    "rocm.version": "rocm.version",
    "hip.version": "rocm.hip.header_version",
    "rocm.kmd_version": "driver.amdgpu_version",
    "gpu_arch.gfx_targets": "rocm.gfx_targets",
    "runtime_context.venv_path": "python.venv",
    "runtime_context.conda_env_name": "python.conda_env",
}


def is_upstream(data: object) -> bool:
    if not isinstance(data, dict) or data.get("format") is not None:
        return False
    version = data.get("schema_version")
    return isinstance(version, str) and version.startswith("1.") and any(k in data for k in _MARKER_KEYS)


def check_version(data: dict[str, Json], where: str) -> None:
    version = data.get("schema_version")
    if not (isinstance(version, str) and _VERSION.match(version)):
        raise UsageError(f"{where}: upstream AORTA env.json with unknown schema_version {version!r}",
                         hint="aorta-tui reads upstream schema 1.x (written by amd-aorta 0.x)")


def leaves(data: dict[str, Json]) -> dict[str, Field]:
    version = data.get("schema_version")
    source = f"upstream env.json (schema {version})"
    out: dict[str, Field] = {}

    def walk(node: Json, path: str) -> None:
        if isinstance(node, dict) and node:
            for key in sorted(node):
                walk(node[key], f"{path}.{key}" if path else str(key))
        else:
            value = None if isinstance(node, dict) else node
            out[path] = Field(value=value, state="ok" if value is not None else "unknown",
                              source=f"{source}: {path}",
                              reason=None if value is not None else "null in the upstream file")

    walk({k: v for k, v in data.items() if k != "schema_version"}, "")
    return out


def get_upstream_field(data: dict[str, Json], path: str) -> Json:
    """A dotted path in an upstream file (a leaf or a whole block); UsageError names the nearest."""
    from aorta_tui.core.suggest import close_matches

    node: Json = data
    for i, part in enumerate(path.split(".")):
        if isinstance(node, dict) and part in node:
            node = node[part]
            continue
        where = ".".join(path.split(".")[:i]) or "the top level"
        keys = sorted(node) if isinstance(node, dict) else []
        close = close_matches(part, keys, n=5, cutoff=0.4)
        raise UsageError(f"--field {path}: no key {part!r} under {where} of this upstream env.json",
                         hint=f"nearest keys: {', '.join(close)}" if close else
                         (f"keys here: {', '.join(keys[:12])}" if keys else "this is a value, not an object"))
    return node


def project(data: dict[str, Json]) -> dict[str, Field]:
    """The upstream fields that have an aorta-tui equivalent, under aorta-tui paths."""
    flat = leaves(data)
    out: dict[str, Field] = {}
    for up_path, our_path in COMMON.items():
        leaf = flat.get(up_path)
        if leaf is not None:  # a null is kept: upstream writes null for "absent" too
            # no reason carried over: the projected field says its state only, as it always did
            out[our_path] = Field(value=_normalise(our_path, leaf.value), state=leaf.state,
                                  source=leaf.source)
    env = data.get("env_vars")
    if isinstance(env, dict):
        for name, value in env.items():
            out[f"env_vars.{name}"] = Field(value=value, state="ok",
                                            source=f"upstream env.json: env_vars.{name}")
    return out


def _normalise(path: str, value: Json) -> Json:
    if path == "rocm.gfx_targets" and isinstance(value, list):
        # strings: load_snapshot refused any other gfx_targets (schema._check_upstream)
        targets: list[Json] = [*sorted({str(t) for t in value})]
        return targets
    return value


def count_non_null(data: Json) -> int:
    """Non-null values in an upstream tree (the benchmark's 'fields recorded').

    Objects are walked; a list counts as one value, as it does in an aorta-tui leaf.
    """
    if isinstance(data, dict):
        return sum(count_non_null(v) for k, v in data.items() if k != "schema_version")
    return 0 if data is None else 1
