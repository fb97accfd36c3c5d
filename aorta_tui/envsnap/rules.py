"""How much a difference matters: the ranking and volatility rules shared by the diff and the
snapshot hash.

Ranks, highest first:

* ``numerics`` - can change results: library identities and versions, GPU architecture, TF32 /
  precision / determinism flags, SDPA backends, numerics-relevant environment variables.
* ``scheduling`` - can change timing and concurrency: queues, MPS, ``sched_policy``, clocks,
  power limits, partitions, CPU/cgroup/NUMA limits, scheduling environment variables.
* ``informational`` - neither: paths, hostnames, timestamps, load, temperatures.

A *volatile* field changes between two captures of the same environment (timestamps, load,
current clocks, temperatures): ``env diff`` hides it unless ``--all`` and the snapshot hash
ignores it. Rules are ``fnmatch`` patterns on the path with list indexes written ``[*]``;
the first match wins.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from functools import lru_cache

from aorta_tui.core.inputs import Json
from aorta_tui.envsnap.capture.env_vars import rank_of_variable
from aorta_tui.envsnap.doc import EnvSnapshot
from aorta_tui.envsnap.schema import iter_leaves

RANKS = ("numerics", "scheduling", "informational")
N, S, I = RANKS  # noqa: E741 - short names keep the table readable

# (pattern, rank, volatile)
RULES: tuple[tuple[str, str, bool], ...] = (
    ("probe.*", I, True),
    ("host.hostname_hash", I, True),
    ("host.memory_available_bytes", I, True),
    ("host.load_average", I, True),
    ("host.uptime_s", I, True),
    ("host.kernel_log_gpu_errors", I, True),
    ("host.distro", I, False),
    ("host.cpu_model", I, False),
    ("host.perf_event_paranoid", I, False),
    ("host.tracefs_events", I, False),
    ("host.glibc", N, False),
    ("host.machine", N, False),
    ("host.cpu_isa_flags", N, False),
    ("host.*", S, False),
    ("gpus[*].temperature_c", I, True),
    ("gpus[*].utilization_percent", I, True),
    ("gpus[*].memory_used_bytes", I, True),
    ("gpus[*].clock_sm_mhz", S, True),
    ("gpus[*].clock_mem_mhz", S, True),
    ("gpus[*].pstate", S, True),
    ("gpus[*].uuid_hash", I, False),
    ("gpus[*].pci_bus_id", I, False),
    ("gpus[*].index", I, False),
    ("gpus[*].vbios", I, False),
    ("gpus[*].name", N, False),
    ("gpus[*].vendor", N, False),
    ("gpus[*].architecture", N, False),
    ("gpus[*].compute_units", N, False),
    ("gpus[*].*", S, False),
    ("driver.vendors", N, False),
    ("driver.nvidia_version", N, False),
    ("driver.amdgpu_version", N, False),
    ("driver.*", S, False),
    ("cuda.*.path", I, False),
    ("cuda.*.other_copies", I, False),
    ("cuda.cuda_home", I, False),
    ("cuda.*", N, False),
    ("rocm.*.path", I, False),
    ("rocm.*.other_copies", I, False),
    ("rocm.roots", I, False),
    ("rocm.root", I, False),
    ("rocm.*", N, False),
    ("torch.import_seconds", I, True),
    ("torch.loaded_libraries.*.path", I, False),
    ("torch.num_threads", S, False),
    ("torch.allocator_backend", S, False),
    ("torch.cuda_available", S, False),
    ("torch.device_count", S, False),
    ("torch.*", N, False),
    ("python.executable", I, False),
    ("python.venv", I, False),
    ("python.conda_env", I, False),
    ("python.*", N, False),
)

# Rules for upstream AORTA env.json files (schema 1.x), whose keys differ from ours.
UPSTREAM_RULES: tuple[tuple[str, str, bool], ...] = (
    ("captured_at", I, True),
    ("partial", I, True),
    ("partial_reasons", I, True),
    ("probe_namespace", I, True),
    ("docker.container_id", I, True),
    ("execution_context.*", I, False),
    ("runtime_context.*", I, False),
    ("system_health*", I, True),
    ("*.doc", I, False),
    ("*path*", I, False),
    ("*root*", I, False),
    ("host.glibc_version", N, False),
    ("host.machine", N, False),
    ("host.*", S, False),
    ("nics.*", S, False),
    ("amdgpu_driver.*", S, False),
    ("buck_invocation.*", I, False),
    ("build_system.*", I, False),
    ("container_detected", S, False),
    ("docker.*", I, False),
    ("*", N, False),  # library identities, torch build, SDPA, ROCm stack: numerics
)

_INDEX = re.compile(r"\[\d+\]")


@lru_cache(maxsize=4096)
def classify(path: str, flavour: str = "aorta-tui") -> tuple[str, bool]:
    """(rank, volatile) of a leaf path."""
    if path.startswith("env_vars."):
        return rank_of_variable(path.split(".", 1)[1]), False
    # fnmatch reads "[*]" as a character class, so list indexes become "#" on both sides.
    generic = _INDEX.sub("#", path)
    rules = RULES if flavour == "aorta-tui" else UPSTREAM_RULES
    for pattern, rank, volatile in rules:
        if fnmatchcase(generic, pattern.replace("[*]", "#")):
            return rank, volatile
    return I, False


def is_volatile(path: str, flavour: str = "aorta-tui") -> bool:
    return classify(path, flavour)[1]


def snapshot_hash(snapshot: EnvSnapshot | Mapping[str, object]) -> str:
    """Short sha256 over the non-volatile leaves' (path, state, value): equal environments hash
    equal. A typed snapshot, or a snapshot file's JSON as it is (the sweep hashes its env/
    files without reading them as snapshots: ``core/services.SweepServices``); both give one
    hash, as the leaves come in the written order either way."""
    h = hashlib.sha256()
    for path, state, value in _hashed(snapshot):
        if is_volatile(path):
            continue
        h.update(json.dumps([path, state, value], sort_keys=True, default=str).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


def _hashed(snapshot: EnvSnapshot | Mapping[str, object]) -> Iterator[tuple[str, Json, Json]]:
    if isinstance(snapshot, EnvSnapshot):
        yield from ((path, leaf.state, leaf.value) for path, leaf in snapshot.leaves())
    else:
        yield from ((path, leaf["state"], leaf["value"]) for path, leaf in iter_leaves(snapshot))

