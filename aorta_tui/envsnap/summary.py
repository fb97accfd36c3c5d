"""One screen about a snapshot, for both vendors: ``summarize`` returns groups of rows; the CLI
renders them as rich tables on a terminal and as plain text otherwise."""

from __future__ import annotations

from aorta_tui.core.inputs import Json
from aorta_tui.envsnap import upstream
from aorta_tui.envsnap.doc import EnvSnapshot, Field, Fields, Node, Snapshot, UpstreamSnapshot

Row = tuple[str, str]
Group = tuple[str, list[Row]]


def show(leaf: Node | None, unit: str = "") -> str:
    """A leaf as text: its value, or 'not available (reason)' - never a made-up 0."""
    if not isinstance(leaf, Field):
        return "not recorded"
    if leaf.state != "ok":
        reason = leaf.reason or leaf.state
        return f"not available ({reason})"
    value = leaf.value
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


def _cupti(section: Fields) -> str:
    version = _obj(section.get("cupti")).get("version")
    if isinstance(version, Field) and version.ok and isinstance(version.value, int) \
            and not isinstance(version.value, bool) and version.value >= 0:
        return cupti_version(version.value)
    return _lib(section, "cupti")


def _gib(leaf: Node | None) -> str:
    if isinstance(leaf, Field) and leaf.ok and isinstance(leaf.value, int):
        return f"{leaf.value / 2**30:.1f} GiB"
    return show(leaf)


def _value(node: Node | None) -> Json:
    """A field's value (None: no field there, or none recorded)."""
    return node.value if isinstance(node, Field) else None


def _obj(node: Node | None) -> Fields:
    """``node`` if it is a subtree of fields, else {}: a field where a subtree belongs (or
    nothing) shows "not recorded"."""
    return node if isinstance(node, dict) else {}


def _lib(section: Fields, key: str, version_key: str = "version") -> str:
    entry = _obj(section.get(key))
    version = entry.get(version_key)
    if isinstance(version, Field) and version.ok:
        return str(version.value)
    path = entry.get("path")
    if isinstance(path, Field) and not path.ok:
        return "not found"
    return show(version)


def summarize(snap: Snapshot) -> list[Group]:
    if isinstance(snap, UpstreamSnapshot):
        return _summarize_upstream(snap)
    # A section the snapshot does not hold (a capture that failed as a whole) shows its rows
    # as "not recorded", as a field it does not hold does.
    drv = snap.driver or {}
    return [
        _host_group(snap.host or {}),
        _gpus_group(snap, drv),
        _driver_group(drv),
        _cuda_group(snap.cuda or {}),
        _rocm_group(snap.rocm or {}),
        _torch_group(snap.torch or {}),
        _python_group(snap.python or {}),
        _env_vars_group(snap.env_vars or {}),
        _probe_group(snap.probe or {}),
    ]


def _host_group(h: Fields) -> Group:
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


def _gpus_group(snap: EnvSnapshot, drv: Fields) -> Group:
    """Two rows per GPU; without a GPU, the driver's GPU count (which says why)."""
    gpus = snap.gpus or ()
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


def _driver_group(drv: Fields) -> Group:
    return ("driver", [
        ("nvidia", f"{show(drv.get('nvidia_version'))} ({show(drv.get('nvidia_kernel_module'))} module)"
         if _ok(drv.get("nvidia_version")) else show(drv.get("nvidia_version"))),
        ("nvidia mps", show(drv.get("mps_daemon"))),
        ("amdgpu", show(drv.get("amdgpu_version"))),
        ("amdgpu sched", show(drv.get("amdgpu_params"))),
    ])


def _cuda_group(c: Fields) -> Group:
    return ("cuda", [
        ("driver api / runtime", f"{show(c.get('driver_api_version'))} / {_lib(c, 'runtime')}"),
        ("cuBLAS / cuBLASLt", f"{_lib(c, 'cublas')} / {_lib(c, 'cublaslt')}"),
        ("cuDNN / NCCL", f"{_lib(c, 'cudnn')} / {_lib(c, 'nccl')}"),
        ("CUPTI / NVRTC / nvcc", f"{_cupti(c)} / {_lib(c, 'nvrtc')} / {show(c.get('nvcc'))}"),
    ])


def _rocm_group(r: Fields) -> Group:
    return ("rocm", [
        ("version", f"{show(r.get('version'))} ({show(r.get('layout'))} at {show(r.get('root'))})"
         if _ok(r.get("version")) else show(r.get("version"))),
        ("HIP / rocBLAS", f"{_lib(r, 'hip', 'api_version')} / {_lib(r, 'rocblas', 'api_version')}"),
        ("hipBLASLt / MIOpen / RCCL", f"{_lib(r, 'hipblaslt', 'header_version')} / "
                                      f"{_lib(r, 'miopen', 'api_version')} / {_lib(r, 'rccl', 'api_version')}"),
        ("gfx targets", show(r.get("gfx_targets"))),
    ])


def _torch_group(t: Fields) -> Group:
    """A GPU build's settings, a CPU-only build's precision, or why torch is missing."""
    gpu_build = _ok(t.get("cuda_build_version")) or _ok(t.get("hip_build_version"))
    if _ok(t.get("version")) and gpu_build:
        build = t.get("cuda_build_version") if _ok(t.get("cuda_build_version")) else t.get("hip_build_version")
        return ("torch", [
            ("version", f"{show(t.get('version'))} (built for {show(build)}), commit "
                        f"{str(_value(t.get('git_commit')) or '?')[:12]}"),
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
                        f"{str(_value(t.get('git_commit')) or '?')[:12]}"),
            ("precision", f"fp32 matmul precision {show(t.get('float32_matmul_precision'))}, "
                          f"deterministic {show(t.get('deterministic_algorithms'))}, "
                          f"{show(t.get('num_threads'))} threads"),
        ])
    return ("torch", [("version", show(t.get("version")))])


def _python_group(p: Fields) -> Group:
    pkgs = {k: v.value for k, v in _obj(p.get("packages")).items() if isinstance(v, Field) and v.value}
    return ("python", [
        ("version", f"{show(p.get('version'))} {show(p.get('implementation'))}, venv {show(p.get('venv'))}"),
        ("packages", ", ".join(f"{k} {v}" for k, v in pkgs.items()) or "none of the tracked packages"),
    ])


def _env_vars_group(env: Fields) -> Group:
    set_vars = [f"{k}={v.value}" for k, v in env.items() if isinstance(v, Field) and v.is_set]
    return ("env_vars", [(f"set ({len(set_vars)} of {len(env)} tracked)",
                          "; ".join(set_vars) if set_vars else "none")])


def _probe_group(pr: Fields) -> Group:
    return ("probe", [
        ("captured", f"{show(pr.get('captured_at'))} in {show(pr.get('duration_s'), ' s')}"),
        ("field states", show(pr.get("state_counts"))),
        ("needs root", show(pr.get("fields_needing_root")) if not _value(pr.get("is_root"))
         else "running as root"),
    ])


def _ok(leaf: Node | None) -> bool:
    return isinstance(leaf, Field) and leaf.ok and leaf.value is not None


def _summarize_upstream(snap: UpstreamSnapshot) -> list[Group]:
    projected = upstream.project(snap.data)
    rows = [(path, show(leaf)) for path, leaf in sorted(projected.items())
            if not path.startswith("env_vars.") or leaf.value is not None]
    return [("upstream AORTA env.json", [("schema_version", str(snap.schema_version)),
                                          ("captured_at", str(snap.data.get("captured_at")))] + rows)]


def render_text(groups: list[Group]) -> str:
    """Plain text; a snapshot's values are a file's text: escapes shown, never obeyed."""
    from aorta_tui.core.text import inert

    width = max((len(label) for _, rows in groups for label, _ in rows), default=10)
    lines: list[str] = []
    for title, rows in groups:
        lines.append(f"[{inert(title)}]")
        lines.extend(f"  {inert(label):<{width}}  {inert(text)}" for label, text in rows)
    return "\n".join(lines) + "\n"
