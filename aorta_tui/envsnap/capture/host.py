"""Host section: kernel, distro, libc, CPU, memory, NUMA, container/VM, cgroup limits,
IOMMU, huge pages, and two root-only readings (kernel log GPU errors, tracefs)."""

from __future__ import annotations

import errno
import os
import platform
import re
from collections.abc import Callable

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

# Kernel command-line switches that change scheduling, IOMMU or isolation; the rest of the
# command line (root=UUID=..., init arguments) is identifying noise and is not recorded.
_CMDLINE_KEYS = (
    "iommu", "amd_iommu", "intel_iommu", "iommu.passthrough", "iommu.strict", "mitigations",
    "isolcpus", "nohz_full", "rcu_nocbs", "transparent_hugepage", "hugepages",
    "default_hugepagesz", "numa_balancing", "amdgpu.", "nvidia.", "pci", "processor.max_cstate",
    "intel_idle.max_cstate", "idle",
)
# CPU ISA features that change which CPU math kernels (oneDNN, MKL, numpy) run.
_ISA_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2",
)
_SYSTEMD_CONTAINER_VAR = "container"  # lower case by systemd's convention
_GPU_KERNEL_MESSAGE = re.compile(r"NVRM: Xid|amdgpu.*(error|fault|timeout|reset)|GPU reset|kfd.*(error|fault)", re.I)


def capture_host(timeout_s: float) -> dict[str, Leaf]:
    uname = platform.uname()
    cpuinfo = F.read_file("/proc/cpuinfo", max_bytes=8 << 20)
    meminfo = F.read_file("/proc/meminfo")
    cmdline = F.read_file("/proc/cmdline")
    out: dict[str, Leaf] = {
        "kernel_release": F.ok(uname.release, "api:os.uname"),
        "kernel_version": F.ok(uname.version, "api:os.uname"),
        "machine": F.ok(uname.machine, "api:os.uname"),
        "distro": _distro(),
        "glibc": _glibc(),
        "hostname_hash": F.ok(F.short_hash(uname.node), "api:os.uname (sha256, 12 hex)"),
        "cpu_model": _cpu_model(cpuinfo),
        "cpu_logical_cores": F.ok(os.cpu_count(), "api:os.cpu_count"),
        "cpu_physical_cores": _physical_cores(cpuinfo),
        "cpu_affinity_cores": _affinity(),
        "cpu_isa_flags": _isa_flags(cpuinfo),
        "cpu_governor": _first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "memory_total_bytes": _meminfo_bytes(meminfo, "MemTotal"),
        "memory_available_bytes": _meminfo_bytes(meminfo, "MemAvailable"),
        "numa_nodes": _numa_nodes(),
        "numa_balancing": _first_line("/proc/sys/kernel/numa_balancing"),
        "container": _container(),
        "virtualization": _virtualization(cpuinfo, timeout_s),
        "cgroup_cpu_limit": _cgroup_cpu_limit(),
        "cgroup_memory_limit_bytes": _cgroup_memory_limit(),
        "iommu_units": F.list_dir("/sys/class/iommu"),
        "iommu_groups": _count_entries("/sys/kernel/iommu_groups"),
        "kernel_cmdline_flags": _cmdline_flags(cmdline),
        "hugepages_total": _meminfo_int(meminfo, "HugePages_Total"),
        "hugepage_size_bytes": _meminfo_bytes(meminfo, "Hugepagesize"),
        "transparent_hugepages": _bracketed("/sys/kernel/mm/transparent_hugepage/enabled"),
        "transparent_hugepages_defrag": _bracketed("/sys/kernel/mm/transparent_hugepage/defrag"),
        "perf_event_paranoid": _first_line("/proc/sys/kernel/perf_event_paranoid"),
        "cpu_vendor": _cpu_simple(cpuinfo, "vendor_id"),
        "cpu_microcode": _cpu_simple(cpuinfo, "microcode"),
        "cpu_caches": _cpu_caches(),
        "cpu_vulnerabilities": _vulnerabilities(),
        "smt_active": _first_line("/sys/devices/system/cpu/smt/active"),
        "clocksource": _first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "kernel_preemption": _preemption(uname.version),
        "sched_autogroup": _first_line("/proc/sys/kernel/sched_autogroup_enabled"),
        "sched_rt_runtime_us": _first_line("/proc/sys/kernel/sched_rt_runtime_us"),
        "swap_total_bytes": _meminfo_bytes(meminfo, "SwapTotal"),
        "swappiness": _first_line("/proc/sys/vm/swappiness"),
        "overcommit_memory": _first_line("/proc/sys/vm/overcommit_memory"),
        "shm_size_bytes": _statvfs_size("/dev/shm"),
        "rlimit_memlock": _rlimit("RLIMIT_MEMLOCK"),
        "rlimit_nofile": _rlimit("RLIMIT_NOFILE"),
        "load_average": _load_average(),
        "uptime_s": _uptime(),
        "kernel_log_gpu_errors": root_only_field("kernel_log_gpu_errors"),
        "tracefs_events": root_only_field("tracefs_events"),
    }
    return out


def _distro() -> Leaf:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        leaf = F.read_file(path)
        if leaf["state"] == "ok":
            info = dict(
                (k, v.strip('"'))
                for k, _, v in (line.partition("=") for line in leaf["value"].splitlines())
                if k
            )
            name = info.get("PRETTY_NAME") or " ".join(
                x for x in (info.get("NAME"), info.get("VERSION_ID")) if x
            )
            return F.ok(name or None, leaf["source"]) if name else F.unknown("no PRETTY_NAME", leaf["source"])
    return F.unknown("no /etc/os-release or /usr/lib/os-release", "file:/etc/os-release")


def _glibc() -> Leaf:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError) as exc:
        return F.not_applicable(f"not a GNU libc ({exc})", "api:os.confstr")
    if not text:
        return F.not_applicable("not a GNU libc", "api:os.confstr")
    return F.ok(text.removeprefix("glibc ").strip(), "api:os.confstr(CS_GNU_LIBC_VERSION)")


def _cpu_field(cpuinfo: Leaf, key: str) -> str | None:
    for line in cpuinfo["value"].splitlines():
        k, _, v = line.partition(":")
        if k.strip() == key:
            return v.strip()
    return None


def _cpu_model(cpuinfo: Leaf) -> Leaf:
    if cpuinfo["state"] != "ok":
        return dict(cpuinfo)
    for key in ("model name", "Model", "Hardware", "cpu model"):
        value = _cpu_field(cpuinfo, key)
        if value:
            return F.ok(value, cpuinfo["source"])
    return F.unknown("no 'model name' line", cpuinfo["source"])


def _physical_cores(cpuinfo: Leaf) -> Leaf:
    if cpuinfo["state"] != "ok":
        return dict(cpuinfo)
    cores: set[tuple[str, str]] = set()
    phys = core = None
    for line in cpuinfo["value"].splitlines() + [""]:
        k, _, v = line.partition(":")
        k = k.strip()
        if k == "physical id":
            phys = v.strip()
        elif k == "core id":
            core = v.strip()
        elif not line.strip():
            if phys is not None and core is not None:
                cores.add((phys, core))
            phys = core = None
    if not cores:
        return F.unknown("/proc/cpuinfo has no 'physical id'/'core id' lines", cpuinfo["source"])
    return F.ok(len(cores), cpuinfo["source"])


def _affinity() -> Leaf:
    try:
        return F.ok(len(os.sched_getaffinity(0)), "api:os.sched_getaffinity")
    except (AttributeError, OSError) as exc:
        return F.not_applicable(f"sched_getaffinity unavailable ({exc})", "api:os.sched_getaffinity")


def _isa_flags(cpuinfo: Leaf) -> Leaf:
    if cpuinfo["state"] != "ok":
        return dict(cpuinfo)
    flags = _cpu_field(cpuinfo, "flags") or _cpu_field(cpuinfo, "Features")
    if flags is None:
        return F.unknown("no flags line", cpuinfo["source"])
    present = set(flags.split())
    return F.ok([f for f in _ISA_FLAGS if f in present], cpuinfo["source"])


def _meminfo_int(meminfo: Leaf, key: str) -> Leaf:
    if meminfo["state"] != "ok":
        return dict(meminfo)
    m = re.search(rf"^{key}:\s+(\d+)", meminfo["value"], re.M)
    return F.ok(int(m.group(1)), meminfo["source"]) if m else F.unknown(f"no {key} line", meminfo["source"])


def _meminfo_bytes(meminfo: Leaf, key: str) -> Leaf:
    leaf = _meminfo_int(meminfo, key)
    return F.derive(leaf, leaf["value"] * 1024 if leaf["state"] == "ok" else None)


def _first_line(path: str) -> Leaf:
    leaf = F.read_file(path)
    if leaf["state"] != "ok":
        return leaf
    text = leaf["value"].splitlines()[0].strip() if leaf["value"] else ""
    return F.ok(int(text) if re.fullmatch(r"-?\d+", text) else text, leaf["source"])


def _bracketed(path: str) -> Leaf:
    leaf = F.read_file(path)
    if leaf["state"] != "ok":
        return leaf
    m = re.search(r"\[(\w+)\]", leaf["value"])
    return F.ok(m.group(1) if m else leaf["value"], leaf["source"])


def _numa_nodes() -> Leaf:
    leaf = F.list_dir("/sys/devices/system/node")
    if leaf["state"] != "ok":
        return leaf
    return F.ok(sum(1 for n in leaf["value"] if re.fullmatch(r"node\d+", n)), leaf["source"])


def _count_entries(path: str) -> Leaf:
    leaf = F.list_dir(path)
    return F.derive(leaf, len(leaf["value"]) if leaf["state"] == "ok" else None)


def _container() -> Leaf:
    evidence: list[str] = []
    runtime = None
    if os.path.exists("/.dockerenv"):
        evidence.append("/.dockerenv")
        runtime = "docker"
    if os.path.exists("/run/.containerenv"):
        evidence.append("/run/.containerenv")
        runtime = runtime or "podman"
    systemd_marker = os.environ.get(_SYSTEMD_CONTAINER_VAR)  # set by systemd-nspawn, podman
    if systemd_marker:
        evidence.append("$container")
        runtime = runtime or systemd_marker
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("$KUBERNETES_SERVICE_HOST")
        runtime = runtime or "kubernetes"
    cgroup = F.read_file("/proc/1/cgroup")
    if cgroup["state"] == "ok":
        for marker in ("kubepods", "docker", "containerd", "libpod", "lxc", "crio"):
            if marker in cgroup["value"]:
                evidence.append(f"/proc/1/cgroup mentions {marker}")
                runtime = runtime or marker
                break
    source = "file:/.dockerenv,/run/.containerenv,/proc/1/cgroup; env:container"
    if runtime is None:
        return F.ok(None, source)  # looked everywhere: not in a container
    return F.ok(runtime, source + " (" + "; ".join(evidence) + ")")


def _virtualization(cpuinfo: Leaf, timeout_s: float) -> Leaf:
    result = F.run_command(["systemd-detect-virt", "--vm"], timeout_s=min(timeout_s, 2.0))
    text = result.output.strip()
    # systemd-detect-virt --vm prints the hypervisor and exits 0, or prints "none" and exits 1.
    if result.returncode == 0 and text:
        return F.ok(text, "cmd:systemd-detect-virt --vm")
    if result.returncode == 1 and text in ("none", ""):
        return F.ok(None, "cmd:systemd-detect-virt --vm")
    if cpuinfo["state"] == "ok":
        flags = (_cpu_field(cpuinfo, "flags") or "").split()
        vendor = F.read_file("/sys/class/dmi/id/sys_vendor")
        name = vendor["value"] if vendor["state"] == "ok" else "unknown hypervisor"
        return F.ok(name if "hypervisor" in flags else None, "file:/proc/cpuinfo (hypervisor flag)")
    return F.unknown("neither systemd-detect-virt nor /proc/cpuinfo available", "")


def _own_cgroup_v2_dir() -> str | None:
    leaf = F.read_file("/proc/self/cgroup")
    if leaf["state"] != "ok":
        return None
    for line in leaf["value"].splitlines():
        if line.startswith("0::"):
            rel = line[3:].strip()
            path = os.path.join("/sys/fs/cgroup", rel.lstrip("/"))
            return path if os.path.isdir(path) else "/sys/fs/cgroup"
    return None


def _own_source(leaf: Leaf, name: str) -> Leaf:
    # A process's cgroup path names its container id: keep it out of the snapshot.
    leaf["source"] = f"file:/sys/fs/cgroup/<own cgroup>/{name}"
    return leaf


def _own_cgroup_v1_dir(controller: str) -> str:
    """This process's cgroup v1 directory for ``controller`` (falls back to the root)."""
    root = f"/sys/fs/cgroup/{controller}"
    leaf = F.read_file("/proc/self/cgroup")
    if leaf["state"] == "ok":
        for line in leaf["value"].splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3 and controller in parts[1].split(","):
                path = os.path.join(root, parts[2].strip().lstrip("/"))
                if os.path.isdir(path):
                    return path.rstrip("/")
    return root


def _v2_chain(own: str, root: str) -> list[str]:
    """The process's cgroup v2 directory and its ancestors up to the visible root."""
    chain = []
    path, root = own.rstrip("/"), root.rstrip("/")
    while path.startswith(root):
        chain.append(path)
        if path == root:
            break
        path = os.path.dirname(path)
    return chain


def v2_limit(name: str, parse: Callable[[str], float | None], own: str | None = None,
             root: str = "/sys/fs/cgroup") -> Leaf | None:
    """Effective cgroup v2 limit: the smallest ``name`` on the way up (a parent's limit binds).

    None when this is not a cgroup v2 system (the caller then tries v1).
    """
    own = own if own is not None else _own_cgroup_v2_dir()
    if own is None or not os.path.exists(os.path.join(root, "cgroup.controllers")):
        return None
    source = f"file:/sys/fs/cgroup/<own cgroup and ancestors>/{name}"
    limits: list[float] = []
    for directory in _v2_chain(own, root):
        leaf = F.read_file(os.path.join(directory, name))
        if leaf["state"] == "error":
            leaf["source"] = source
            return leaf
        if leaf["state"] == "ok":
            try:
                value = parse(leaf["value"])
            except ValueError:
                return F.error(f"cannot parse {name}: {leaf['value']!r}", source)
            if value is not None:
                limits.append(value)
    if not limits:
        # cgroup v2 with no limit file set anywhere we can see: nothing caps this process.
        return F.ok("unlimited", source + " (none sets a limit)")
    best = min(limits)
    return F.ok(round(best, 3) if isinstance(best, float) else best, source)


def parse_cpu_max(text: str) -> float | None:
    quota, _, period = text.partition(" ")
    return None if quota == "max" else int(quota) / int(period or 100000)


def parse_memory_max(text: str) -> int | None:
    return None if text == "max" else int(text)


def _cgroup_cpu_limit() -> Leaf:
    v2 = v2_limit("cpu.max", parse_cpu_max)
    if v2 is not None:
        return v2
    base = _own_cgroup_v1_dir("cpu")
    quota = _own_source(F.read_file(f"{base}/cpu.cfs_quota_us"), "cpu/cpu.cfs_quota_us")
    period = F.read_file(f"{base}/cpu.cfs_period_us")
    if quota["state"] == "ok" and period["state"] == "ok":
        try:
            q, per = int(quota["value"]), int(period["value"])
        except ValueError:
            return F.error(f"cannot parse cfs quota/period: {quota['value']!r}/{period['value']!r}",
                           quota["source"])
        return F.ok("unlimited" if q < 0 else round(q / per, 3), quota["source"])
    return F.not_applicable("no cgroup cpu controller files readable", "file:/sys/fs/cgroup")


def _cgroup_memory_limit() -> Leaf:
    v2 = v2_limit("memory.max", parse_memory_max)
    if v2 is not None:
        return v2
    leaf = _own_source(
        F.read_file(f"{_own_cgroup_v1_dir('memory')}/memory.limit_in_bytes"),
        "memory/memory.limit_in_bytes",
    )
    if leaf["state"] == "ok":
        try:
            value = int(leaf["value"])
        except ValueError:
            return F.error(f"cannot parse memory.limit_in_bytes: {leaf['value']!r}", leaf["source"])
        # cgroup v1 writes "no limit" as a huge page-aligned number.
        return F.ok("unlimited" if value >= 1 << 60 else value, leaf["source"])
    return F.not_applicable("no cgroup memory controller files readable", "file:/sys/fs/cgroup")


def _cmdline_flags(cmdline: Leaf) -> Leaf:
    if cmdline["state"] != "ok":
        return dict(cmdline)
    tokens = cmdline["value"].split(" -- ")[0].split()
    keep = sorted(t for t in tokens if t.split("=", 1)[0].startswith(_CMDLINE_KEYS))
    return F.ok(keep, cmdline["source"] + " (scheduling/IOMMU switches only)")


def _cpu_simple(cpuinfo: Leaf, key: str) -> Leaf:
    if cpuinfo["state"] != "ok":
        return dict(cpuinfo)
    value = _cpu_field(cpuinfo, key)
    return F.ok(value, cpuinfo["source"]) if value else F.not_applicable(f"no {key!r} line", cpuinfo["source"])


def _cpu_caches() -> Leaf:
    base = "/sys/devices/system/cpu/cpu0/cache"
    listing = F.list_dir(base)
    if listing["state"] != "ok":
        return listing
    caches: dict[str, str] = {}
    for index in listing["value"]:
        level = F.read_file(f"{base}/{index}/level")
        kind = F.read_file(f"{base}/{index}/type")
        size = F.read_file(f"{base}/{index}/size")
        if "ok" == level["state"] == kind["state"] == size["state"]:
            caches[f"L{level['value']}{ {'Data': 'd', 'Instruction': 'i'}.get(kind['value'], '') }"] = size["value"]
    return F.ok(dict(sorted(caches.items())), f"file:{base}/index*/{{level,type,size}}")


def _vulnerabilities() -> Leaf:
    base = "/sys/devices/system/cpu/vulnerabilities"
    listing = F.list_dir(base)
    if listing["state"] != "ok":
        return listing
    out = {}
    for name in listing["value"]:
        leaf = F.read_file(f"{base}/{name}")
        if leaf["state"] == "ok":
            out[name] = leaf["value"]
    return F.ok(out, f"file:{base}/*")


def _preemption(version: str) -> Leaf:
    for marker, mode in (("PREEMPT_RT", "rt"), ("PREEMPT_DYNAMIC", "dynamic"), ("PREEMPT ", "full")):
        if marker in version + " ":
            return F.ok(mode, "api:os.uname().version")
    return F.ok("none-or-voluntary", "api:os.uname().version")


def _statvfs_size(path: str) -> Leaf:
    try:
        st = os.statvfs(path)
    except FileNotFoundError:
        return F.not_applicable(f"{path} does not exist", f"api:os.statvfs({path})")
    except OSError as exc:
        return F.error(f"statvfs {path} failed: {exc.strerror}", f"api:os.statvfs({path})")
    return F.ok(st.f_frsize * st.f_blocks, f"api:os.statvfs({path})")


def _rlimit(name: str) -> Leaf:
    import resource

    try:
        soft, hard = resource.getrlimit(getattr(resource, name))
    except (AttributeError, ValueError, OSError) as exc:
        return F.not_applicable(f"{name} unavailable ({exc})", f"api:resource.getrlimit({name})")

    def show(v: int) -> int | str:
        return "unlimited" if v == resource.RLIM_INFINITY else v

    return F.ok({"soft": show(soft), "hard": show(hard)}, f"api:resource.getrlimit({name})")


def _load_average() -> Leaf:
    try:
        return F.ok([round(x, 2) for x in os.getloadavg()], "api:os.getloadavg")
    except OSError as exc:
        return F.unknown(f"getloadavg failed ({exc})", "api:os.getloadavg")


def _uptime() -> Leaf:
    leaf = F.read_file("/proc/uptime")
    return F.derive(leaf, float(leaf["value"].split()[0]) if leaf["state"] == "ok" else None)


def _kernel_log_gpu_errors() -> Leaf:
    """Count GPU error lines (NVIDIA Xid, amdgpu faults/resets) in the kernel ring buffer.

    /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1, so a non-root probe reports
    this field as needing root instead of guessing.
    """
    source = "file:/dev/kmsg"
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return F.not_applicable("/dev/kmsg does not exist", source)
    except PermissionError:
        if os.geteuid() == 0:
            return F.error("permission denied reading /dev/kmsg even as root", source)
        return F.error("permission denied reading /dev/kmsg (kernel.dmesg_restrict); needs root",
                       source, needs_root=True)
    except OSError as exc:
        return F.error(f"opening /dev/kmsg failed: {exc.strerror}", source)
    count = 0
    try:
        for _ in range(200000):  # bounded: the ring buffer is finite, but be sure
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while reading: skip ahead
                    continue
                return F.error(f"reading /dev/kmsg failed: {exc.strerror}", source)
            if not record:
                break
            if _GPU_KERNEL_MESSAGE.search(record.decode("utf-8", "replace")):
                count += 1
    finally:
        os.close(fd)
    return F.ok(count, source + " (lines matching NVRM Xid / amdgpu or kfd errors)")


# The fields only root can read (kernel.dmesg_restrict, tracefs mode 0700). Under sudo the tool
# runs as the user, and the privileged helper reads them (envsnap/privileged.py).
ROOT_ONLY_FIELDS: dict[str, Callable[[], Leaf]] = {}


def root_only_field(name: str) -> Leaf:
    """The field as this process can read it; asked of the privileged helper when this
    process may not and the tool runs under sudo."""
    from aorta_tui.privsep import client as privsep

    leaf = ROOT_ONLY_FIELDS[name]()
    conn = privsep.current() if leaf.get("needs_root") else None
    if conn is None:
        return leaf
    try:
        answer = conn.call("snapshot_field", name=name).get("leaf")
    except privsep.HelperRefused as exc:
        return F.error(f"{leaf['reason']}; the privileged helper could not read it: {exc.message}",
                       leaf["source"], needs_root=True)
    if not F.is_leaf(answer) or answer["state"] not in F.STATES:
        return F.error("the privileged helper's answer is not a field", leaf["source"], needs_root=True)
    answer["source"] = f"{answer.get('source', '')} (read by the privileged helper as root)"
    return answer


def _tracefs_events() -> Leaf:
    for path in ("/sys/kernel/tracing/available_events", "/sys/kernel/debug/tracing/available_events"):
        leaf = F.read_file(path, max_bytes=16 << 20)
        if leaf["state"] == "ok":
            return F.ok(len(leaf["value"].splitlines()), leaf["source"] + " (line count)")
        if leaf.get("needs_root") or leaf["state"] == "error":
            return leaf
    return F.not_applicable("tracefs is not mounted", "file:/sys/kernel/tracing")


ROOT_ONLY_FIELDS.update(kernel_log_gpu_errors=_kernel_log_gpu_errors, tracefs_events=_tracefs_events)
