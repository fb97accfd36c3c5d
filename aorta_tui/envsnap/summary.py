"""One screen about a snapshot, for both vendors: ``summarize`` returns groups of rows; the CLI
renders them as rich tables on a terminal and as plain text otherwise."""

from __future__ import annotations

from typing import Any

from aorta_tui.envsnap import upstream
from aorta_tui.envsnap.fields import is_leaf

Row = tuple[str, str]
Group = tuple[str, list[Row]]


def show(leaf: Any, unit: str = "") -> str:
    """A leaf as text: its value, or 'not available (reason)' - never a made-up 0."""
    if not is_leaf(leaf):
        return "not recorded"
    if leaf["state"] != "ok":
        reason = leaf.get("reason") or leaf["state"]
        return f"not available ({reason})"
    value = leaf["value"]
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) if value else "none"
    return f"{value}{unit}"


def cupti_version(code: int) -> str:
    """cuptiGetVersion's number as people write versions: CUDA 13's CUPTI reports
    10000*major + 100*minor + patch (130001 = 13.0.1); older ones a small API level (18)."""
    if code >= 10000:
        major, rest = divmod(code, 10000)
        minor, patch = divmod(rest, 100)
        return f"{major}.{minor}.{patch}"
    return f"API {code}"


def _cupti(section: dict[str, Any]) -> str:
    version = _obj(section.get("cupti")).get("version")
    if is_leaf(version) and version["state"] == "ok" and isinstance(version["value"], int) \
            and not isinstance(version["value"], bool) and version["value"] >= 0:
        return cupti_version(version["value"])
    return _lib(section, "cupti")


def _gib(leaf: Any) -> str:
    if is_leaf(leaf) and leaf["state"] == "ok" and isinstance(leaf["value"], int):
        return f"{leaf['value'] / 2**30:.1f} GiB"
    return show(leaf)


def _get(snap: dict[str, Any], *path: str) -> Any:
    node: Any = snap
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def _obj(node: Any) -> dict[str, Any]:
    """``node`` if it is a subtree of fields, else {}: a damaged subtree shows "not recorded"."""
    return node if isinstance(node, dict) and not is_leaf(node) else {}


def _lib(section: dict[str, Any], key: str, version_key: str = "version") -> str:
    entry = _obj(section.get(key))
    version = entry.get(version_key)
    if is_leaf(version) and version["state"] == "ok":
        return str(version["value"])
    path = entry.get("path")
    if is_leaf(path) and path["state"] != "ok":
        return "not found"
    return show(version)


def summarize(snap: dict[str, Any]) -> list[Group]:
    if upstream.is_upstream(snap):
        return _summarize_upstream(snap)
    # load_snapshot checked each section's type; a snapshot built in memory gets the same
    # leniency below as a damaged subtree: what is not there shows as "not recorded".
    drv = _obj(snap.get("driver"))
    return [
        _host_group(_obj(snap.get("host"))),
        _gpus_group(snap, drv),
        _driver_group(drv),
        _cuda_group(_obj(snap.get("cuda"))),
        _rocm_group(_obj(snap.get("rocm"))),
        _torch_group(_obj(snap.get("torch"))),
        _python_group(_obj(snap.get("python"))),
        _env_vars_group(_obj(snap.get("env_vars"))),
        _probe_group(_obj(snap.get("probe"))),
    ]


def _host_group(h: dict[str, Any]) -> Group:
    return ("host", [
        ("kernel", f"{show(h.get('kernel_release'))} ({show(h.get('machine'))})"),
        ("distro / glibc", f"{show(h.get('distro'))} / glibc {show(h.get('glibc'))}"),
        ("cpu", f"{show(h.get('cpu_model'))}: {show(h.get('cpu_physical_cores'))} cores, "
                f"{show(h.get('cpu_logical_cores'))} threads, {show(h.get('cpu_affinity_cores'))} usable"),
        ("memory / numa", f"{_gib(h.get('memory_total_bytes'))}, {show(h.get('numa_nodes'))} NUMA node(s)"),
        ("container / vm", f"{show(h.get('container'))} / {show(h.get('virtualization'))}"),
        ("cgroup cpu / mem", f"{show(h.get('cgroup_cpu_limit'))} / {_gib(h.get('cgroup_memory_limit_bytes'))}"),
        ("hugepages / thp", f"{show(h.get('hugepages_total'))} / {show(h.get('transparent_hugepages'))}"),
        ("iommu", f"units: {show(h.get('iommu_units'))}; groups: {show(h.get('iommu_groups'))}"),
    ])


def _gpus_group(snap: dict[str, Any], drv: dict[str, Any]) -> Group:
    """Two rows per GPU; without a GPU, the driver's GPU count (which says why)."""
    gpus = [_obj(d) for d in snap.get("gpus") or [] if isinstance(d, dict)]
    rows: list[Row] = []
    for d in gpus:
        rows.append((f"gpu {show(d.get('index'))}",
                     f"{show(d.get('name'))} {show(d.get('architecture'))}, "
                     f"{show(d.get('compute_units'))} {'SMs' if show(d.get('vendor')) == 'nvidia' else 'CUs'}, "
                     f"{_gib(d.get('memory_total_bytes'))}, bus {show(d.get('pci_bus_id'))}"))
        rows.append(("  modes", f"partition {show(d.get('partition_mode'))}, ECC {show(d.get('ecc'))}, "
                               f"persistence {show(d.get('persistence_mode'))}, "
                               f"power {show(d.get('power_limit_w'), ' W')} of {show(d.get('power_max_limit_w'), ' W')}, "
                               f"SM clock {show(d.get('clock_sm_mhz'))}/{show(d.get('clock_sm_max_mhz'), ' MHz')}"))
    if not gpus:
        rows.append(("gpus", show(drv.get("gpu_count"))))
    return ("gpus", rows)


def _driver_group(drv: dict[str, Any]) -> Group:
    return ("driver", [
        ("nvidia", f"{show(drv.get('nvidia_version'))} ({show(drv.get('nvidia_kernel_module'))} module)"
         if _ok(drv.get("nvidia_version")) else show(drv.get("nvidia_version"))),
        ("nvidia mps", show(drv.get("mps_daemon"))),
        ("amdgpu", show(drv.get("amdgpu_version"))),
        ("amdgpu sched", show(drv.get("amdgpu_params"))),
    ])


def _cuda_group(c: dict[str, Any]) -> Group:
    return ("cuda", [
        ("driver api / runtime", f"{show(c.get('driver_api_version'))} / {_lib(c, 'runtime')}"),
        ("cuBLAS / cuBLASLt", f"{_lib(c, 'cublas')} / {_lib(c, 'cublaslt')}"),
        ("cuDNN / NCCL", f"{_lib(c, 'cudnn')} / {_lib(c, 'nccl')}"),
        ("CUPTI / NVRTC / nvcc", f"{_cupti(c)} / {_lib(c, 'nvrtc')} / {show(c.get('nvcc'))}"),
    ])


def _rocm_group(r: dict[str, Any]) -> Group:
    return ("rocm", [
        ("version", f"{show(r.get('version'))} ({show(r.get('layout'))} at {show(r.get('root'))})"
         if _ok(r.get("version")) else show(r.get("version"))),
        ("HIP / rocBLAS", f"{_lib(r, 'hip', 'api_version')} / {_lib(r, 'rocblas', 'api_version')}"),
        ("hipBLASLt / MIOpen / RCCL", f"{_lib(r, 'hipblaslt', 'header_version')} / "
                                      f"{_lib(r, 'miopen', 'api_version')} / {_lib(r, 'rccl', 'api_version')}"),
        ("gfx targets", show(r.get("gfx_targets"))),
    ])


def _torch_group(t: dict[str, Any]) -> Group:
    """A GPU build's settings, a CPU-only build's precision, or why torch is missing."""
    gpu_build = _ok(t.get("cuda_build_version")) or _ok(t.get("hip_build_version"))
    if _ok(t.get("version")) and gpu_build:
        build = t.get("cuda_build_version") if _ok(t.get("cuda_build_version")) else t.get("hip_build_version")
        return ("torch", [
            ("version", f"{show(t.get('version'))} (built for {show(build)}), commit "
                        f"{str(_get(t, 'git_commit', 'value') or '?')[:12]}"),
            ("arch list", show(t.get("compiled_arch_list"))),
            ("TF32 matmul / cudnn", f"{show(t.get('tf32_matmul'))} / {show(t.get('tf32_cudnn'))}; "
                                    f"fp32 matmul precision {show(t.get('float32_matmul_precision'))}"),
            ("deterministic", f"{show(t.get('deterministic_algorithms'))} (cudnn {show(t.get('cudnn_deterministic'))}, "
                              f"benchmark {show(t.get('cudnn_benchmark'))})"),
            ("SDPA flash/mem/math/cudnn", " / ".join(show(t.get(k)) for k in
                                                    ("sdpa_flash", "sdpa_mem_efficient", "sdpa_math", "sdpa_cudnn"))),
            ("cuDNN / NCCL (torch)", f"{show(t.get('cudnn_version'))} / {show(t.get('nccl_version'))}"),
        ])
    if _ok(t.get("version")):
        return ("torch", [
            ("version", f"{show(t.get('version'))} (CPU-only build), commit "
                        f"{str(_get(t, 'git_commit', 'value') or '?')[:12]}"),
            ("precision", f"fp32 matmul precision {show(t.get('float32_matmul_precision'))}, "
                          f"deterministic {show(t.get('deterministic_algorithms'))}, "
                          f"{show(t.get('num_threads'))} threads"),
        ])
    return ("torch", [("version", show(t.get("version")))])


def _python_group(p: dict[str, Any]) -> Group:
    pkgs = {k: v["value"] for k, v in _obj(p.get("packages")).items() if is_leaf(v) and v["value"]}
    return ("python", [
        ("version", f"{show(p.get('version'))} {show(p.get('implementation'))}, venv {show(p.get('venv'))}"),
        ("packages", ", ".join(f"{k} {v}" for k, v in pkgs.items()) or "none of the tracked packages"),
    ])


def _env_vars_group(env: dict[str, Any]) -> Group:
    set_vars = [f"{k}={v['value']}" for k, v in env.items() if is_leaf(v) and v.get("set")]
    return ("env_vars", [(f"set ({len(set_vars)} of {len(env)} tracked)",
                          "; ".join(set_vars) if set_vars else "none")])


def _probe_group(pr: dict[str, Any]) -> Group:
    return ("probe", [
        ("captured", f"{show(pr.get('captured_at'))} in {show(pr.get('duration_s'), ' s')}"),
        ("field states", show(pr.get("state_counts"))),
        ("needs root", show(pr.get("fields_needing_root")) if not _get(pr, "is_root", "value")
         else "running as root"),
    ])


def _ok(leaf: Any) -> bool:
    return is_leaf(leaf) and leaf["state"] == "ok" and leaf["value"] is not None


def _summarize_upstream(snap: dict[str, Any]) -> list[Group]:
    projected = upstream.project(snap)
    rows = [(path, show(leaf)) for path, leaf in sorted(projected.items())
            if not path.startswith("env_vars.") or leaf["value"] is not None]
    return [("upstream AORTA env.json", [("schema_version", str(snap.get("schema_version"))),
                                          ("captured_at", str(snap.get("captured_at")))] + rows)]


def render_text(groups: list[Group]) -> str:
    """Plain text; a snapshot's values are a file's text: escapes shown, never obeyed."""
    from aorta_tui.core.text import inert

    width = max((len(label) for _, rows in groups for label, _ in rows), default=10)
    lines: list[str] = []
    for title, rows in groups:
        lines.append(f"[{inert(title)}]")
        lines.extend(f"  {inert(label):<{width}}  {inert(text)}" for label, text in rows)
    return "\n".join(lines) + "\n"
