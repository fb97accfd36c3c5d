"""Registries of mitigations, environments and workloads.

Built-ins live here; plugins add more through the entry-point groups ``aorta_tui.mitigations``,
``aorta_tui.environments`` and ``aorta_tui.workloads``, and through sidecar JSON files
(``--mitigations-file``). A name defined twice is an error, never a silent override.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.suggest import did_you_mean, did_you_mean_any
from aorta_tui.recipe.checks import docker_image_problem, env_entry_problem
from aorta_tui.recipe.upstream_workloads import not_carried

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from _typeshed import DataclassInstance

    from aorta_tui.registry.workload import Workload


@dataclass(frozen=True)
class Mitigation:
    """A named bundle of environment variables, plus optional in-process switches.

    ``switches`` name actions a workload performs inside its process before the first GPU op
    (see ``aorta_tui.registry.switches``), for knobs no environment variable controls on
    every vendor, such as TF32 on CUDA.
    """

    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    switches: tuple[str, ...] = ()
    description: str = ""
    vendor: str = "any"  # any, rocm, cuda
    source: str = "aorta-tui"


@dataclass(frozen=True)
class Environment:
    """Where trials run: this host (``local``) or a container image (``docker``)."""

    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    docker: str | None = None
    description: str = ""
    source: str = "aorta-tui"
    # upstream's GPU-emulated environments (mirage + rocjitsu): see emulator_problem
    emulator: str | None = None
    mirage_profile: str | None = None






def _m(name: str, env: dict[str, str], desc: str, vendor: str = "rocm", switches: tuple[str, ...] = ()) -> Mitigation:
    return Mitigation(name=name, env=env, description=desc, vendor=vendor, switches=switches)


# Upstream AORTA's 22 built-ins (same names and variables), then CUDA/NCCL additions.
BUILTIN_MITIGATIONS: tuple[Mitigation, ...] = (
    _m("none", {}, "no change (the baseline)", "any"),
    _m("amd_log_level_4", {"AMD_LOG_LEVEL": "4"}, "HIP runtime verbose logging"),
    _m("debug_clr_no_batch_cpu_sync", {"DEBUG_CLR_BATCH_CPU_SYNC_SIZE": "0"}, "CLR: no batched CPU sync"),
    _m("debug_hip_dynamic_queues_1", {"DEBUG_HIP_DYNAMIC_QUEUES": "1"}, "HIP dynamic queues mode 1"),
    _m("debug_hip_dynamic_queues_2", {"DEBUG_HIP_DYNAMIC_QUEUES": "2"}, "HIP dynamic queues mode 2"),
    _m("fa_prefer_aotriton", {"TORCH_ROCM_FA_PREFER_CK": "0"}, "PyTorch ROCm flash attention: AOTriton"),
    _m("fa_prefer_ck", {"TORCH_ROCM_FA_PREFER_CK": "1"}, "PyTorch ROCm flash attention: CK"),
    _m("gpu_force_blit_copy_128", {"GPU_FORCE_BLIT_COPY_SIZE": "128"}, "force blit copies up to 128 KiB"),
    _m("gpu_max_hw_queues_2", {"GPU_MAX_HW_QUEUES": "2"}, "limit HIP to 2 hardware queues"),
    _m("hip_launch_blocking", {"HIP_LAUNCH_BLOCKING": "1"}, "serialise HIP kernel launches"),
    _m("hsa_disable_cache", {"HSA_DISABLE_CACHE": "1"}, "HSA: disable code object cache"),
    _m("hsa_enable_cache", {"HSA_DISABLE_CACHE": "0"}, "HSA: enable code object cache"),
    _m("hsa_no_scratch_reclaim", {"HSA_NO_SCRATCH_RECLAIM": "1"}, "HSA: never reclaim scratch"),
    _m("hsa_no_sdma", {"HSA_ENABLE_SDMA": "0"}, "HSA: copies by blit kernels, not SDMA engines"),
    _m("nccl_launch_order_implicit", {"NCCL_LAUNCH_ORDER_IMPLICIT": "1"}, "NCCL/RCCL implicit launch order", "any"),
    _m(
        "pytorch_alloc_expandable_segments",
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        "PyTorch caching allocator: expandable segments",
        "any",
    ),
    _m(
        "pytorch_no_cuda_memory_caching",
        {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
        "PyTorch: no caching allocator",
        "any",
    ),
    _m("rccl_gfx942_cheap_fence_off", {"RCCL_GFX942_CHEAP_FENCE_OFF": "1"}, "RCCL: full fences on gfx942"),
    _m("roc_aql_queue_size_1024", {"ROC_AQL_QUEUE_SIZE": "1024"}, "ROCr: 1024-packet AQL queues"),
    _m("roc_signal_pool_16k", {"ROC_SIGNAL_POOL_SIZE": "16384"}, "ROCr: 16k signal pool"),
    # DISABLE_TF32 is honoured by ROCm PyTorch only; the switch makes it real on CUDA too.
    _m("tf32_off", {"DISABLE_TF32": "1"}, "disable TF32 (env on ROCm, torch flags everywhere)", "any", ("torch.tf32_off",)),
    _m("xnack", {"HSA_XNACK": "1"}, "HSA: enable XNACK (retry on page fault)"),
    # CUDA / NCCL additions.
    _m("cuda_launch_blocking", {"CUDA_LAUNCH_BLOCKING": "1"}, "serialise CUDA kernel launches", "cuda"),
    _m("cuda_device_max_connections_1", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "one hardware work queue", "cuda"),
    _m("cuda_device_max_connections_8", {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, "8 hardware work queues (default)", "cuda"),
    _m("cuda_device_max_connections_32", {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}, "32 hardware work queues", "cuda"),
    _m(
        "cublas_deterministic",
        {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        "cuBLAS deterministic workspace",
        "cuda",
    ),
    _m(
        "deterministic",
        {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        "deterministic algorithms in PyTorch (and cuBLAS workspace)",
        "any",
        ("torch.deterministic",),
    ),
    _m("nccl_debug_info", {"NCCL_DEBUG": "INFO"}, "NCCL/RCCL INFO logging", "any"),
    _m("nccl_p2p_disable", {"NCCL_P2P_DISABLE": "1"}, "NCCL: no peer-to-peer transport", "any"),
    _m("nccl_proto_simple", {"NCCL_PROTO": "Simple"}, "NCCL: Simple protocol only", "any"),
    _m("cuda_module_loading_eager", {"CUDA_MODULE_LOADING": "EAGER"}, "load all CUDA modules at start", "cuda"),
)

BUILTIN_ENVIRONMENTS: tuple[Environment, ...] = (
    Environment("local", description="this host, this Python"),
    Environment("default", description="this host, this Python (upstream's alias of local)"),
    Environment("emulated-rocjitsu", emulator="rocjitsu", mirage_profile="mi350x",
                description="upstream's GPU emulator: mirage + rocjitsu (MI350X profile); not "
                            "run by aorta-tui"),
    Environment("emulated-rocjitsu-dbt", emulator="rocjitsu-dbt", mirage_profile="dbt-mi350x",
                description="upstream's mirage + rocjitsu-dbt (binary translation onto a GPU); "
                            "not run by aorta-tui"),
)


def emulator_problem(env: Environment) -> tuple[str, str] | None:
    """Why a cell of an emulated environment cannot run here (message, fix), or None.

    Upstream launches these under its mirage control plane with the rocjitsu emulator;
    aorta-tui does not drive mirage, so such a cell never runs (its results would not be
    emulated results). The message says what upstream needs, and whether it is installed.
    """
    if env.emulator is None:
        return None
    import os
    import shutil

    override = os.environ.get("MIRAGE_BIN")
    found = shutil.which(os.path.expanduser(override)) if override else shutil.which("mirage")
    have = (f"mirage is installed ({found}), but aorta-tui does not launch trials under it"
            if found else "the mirage CLI is not installed ($MIRAGE_BIN unset and no `mirage` "
            "on PATH)")
    return (f"environment {env.name!r} runs trials under the {env.emulator} GPU emulator "
            f"(mirage profile {env.mirage_profile}): {have}",
            "install AMD's mirage + rocjitsu and run this recipe with upstream AORTA (`aorta "
            "sweep run`), or use environment `local` on a real GPU")


def _entry_points(group: str) -> list[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))


def _merge(kind: str, items: Iterable[Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for item in items:
        prior = merged.get(item.name)
        if prior is not None:
            raise UsageError(
                f"{kind} {item.name!r} is defined twice (by {prior.source} and by {item.source})",
                hint=f"rename one of them; {kind} names must be unique",
            )
        merged[item.name] = item
    return merged


MAX_SIDECAR_BYTES = 4 * 1024 * 1024
MAX_SIDECAR_ENTRIES = 10_000
MITIGATION_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
_SIDECAR_KEYS = ("name", "env", "description", "switches", "vendor")
_VENDORS = ("any", "rocm", "cuda")
_SIDECAR_HINT = 'expected {"my_mitigation": {"env": {"VAR": "value"}}}'




def _json_position(text: str, key: str) -> str:
    """``:line:col`` of the first ``"key"`` in the JSON text, or "" (json.loads keeps none)."""
    needle = json.dumps(key)
    at = text.find(needle)
    if at < 0:
        return ""
    line = text.count("\n", 0, at) + 1
    return f":{line}:{at - (text.rfind(chr(10), 0, at) + 1) + 1}"


def load_sidecar_mitigations(path: str | Path) -> list[Mitigation]:
    """Read ``{"name": {"env": {...}, "description": "..."}}`` or a list of such objects.

    Read through :mod:`aorta_tui.core.inputs` (regular files only, size limit, bounded
    nesting, located JSON errors); every name and value is checked as a recipe's are.
    """
    from aorta_tui.core.inputs import clip_for_message, parse_json_text, read_input_text

    p = Path(path)
    text = read_input_text(p, what="mitigations sidecar", limit=MAX_SIDECAR_BYTES,
                           hint=_SIDECAR_HINT)
    if not text.strip():
        raise UsageError(f"{p}: the mitigations sidecar is empty", hint=_SIDECAR_HINT)
    # parsed from the text (not load_json_input): the text locates entries in messages
    data = parse_json_text(text, where=str(p), what="mitigations sidecar", hint=_SIDECAR_HINT)
    if isinstance(data, dict) and "version" in data:
        return [_sidecar_entry(p, text, i, e, clip_for_message)
                for i, e in enumerate(_versioned_entries(p, text, data, "mitigations"))]
    if isinstance(data, dict):
        entries = [{"name": k, **(v if isinstance(v, dict) else {"env": v})} for k, v in data.items()]
    elif isinstance(data, list):
        entries = data
    else:
        raise UsageError(f"{p}: top level must be an object or a list, got {type(data).__name__}",
                         hint=_SIDECAR_HINT)
    if len(entries) > MAX_SIDECAR_ENTRIES:
        raise UsageError(f"{p}: {len(entries)} mitigations; at most {MAX_SIDECAR_ENTRIES}")
    out = []
    for i, e in enumerate(entries):
        out.append(_sidecar_entry(p, text, i, e, clip_for_message))
    return out


def _sidecar_entry(p: Path, text: str, i: int, e: object, clip: Callable[[object, int], str]
                   ) -> Mitigation:
    label = e.get("name") if isinstance(e, dict) and isinstance(e.get("name"), str) else None
    where = f"{p}{_json_position(text, label) if label else ''}: entry {clip(label or i, 60)}"
    if not isinstance(e, dict) or label is None:
        raise UsageError(f"{where}: needs a string 'name'", hint=_SIDECAR_HINT)
    if not MITIGATION_NAME_RE.fullmatch(label) or label in (".", ".."):
        raise UsageError(f"{where}: {clip(label, 60)} is not a mitigation name",
                         hint="1-100 letters, digits, '.', '_' or '-', not starting with '.' or '-'")
    unknown = set(e) - set(_SIDECAR_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {clip(sorted(unknown), 120)}",
                         hint="allowed: " + ", ".join(_SIDECAR_KEYS))
    env = e.get("env", {})
    if env is None:
        env = {}
    if not isinstance(env, dict):
        raise UsageError(f"{where}.env must map variable names to strings",
                         hint='quote values: {"GPU_MAX_HW_QUEUES": "2"}')
    for k, v in env.items():
        problem = env_entry_problem(k, v)
        if problem is not None:
            at = _json_position(text, k) if isinstance(k, str) else ""
            raise UsageError(f"{p}{at}: entry {label}: env: {problem[0]}",
                             hint=problem[1] if "name" in problem[0] else
                             'values are strings: {"GPU_MAX_HW_QUEUES": "2"}')
    switches = e.get("switches", [])
    if not isinstance(switches, list) or not all(isinstance(x, str) for x in switches):
        raise UsageError(f"{where}.switches must be a list of switch names",
                         hint='e.g. "switches": ["torch.tf32_off"]')
    from aorta_tui.registry.switches import SWITCHES

    bad = [x for x in switches if x not in SWITCHES]
    if bad:
        raise UsageError(f"{where}.switches: unknown switch {clip(bad[0], 60)}",
                         hint="known switches: " + ", ".join(sorted(SWITCHES)))
    vendor = e.get("vendor", "any")
    if vendor not in _VENDORS:
        raise UsageError(f"{where}.vendor must be one of {', '.join(_VENDORS)}, got "
                         f"{clip(vendor, 40)}")
    description = e.get("description", "")
    if not isinstance(description, str):
        raise UsageError(f"{where}.description must be a string")
    return Mitigation(name=label, env=dict(env), switches=tuple(switches),
                      description=description[:1000], vendor=vendor, source=str(p))


_VERSIONED_KEYS = ("version", "mitigations", "environments")
_VERSIONED_HINT = ('upstream\'s format: {"version": 1, "mitigations": {"name": {"VAR": "value"}}, '
                   '"environments": {"name": {"docker": "image", "env": {"VAR": "value"}}}}')
_SIDECAR_ENV_KEYS = ("docker", "env", "description", "venv", "buck_target", "emulator",
                     "mirage_profile")


def _versioned_entries(p: Path, text: str, data: dict[str, Any], section: str
                       ) -> list[dict[str, Any]]:
    """Entries of upstream AORTA's ``{"version": 1, "mitigations": {...}, "environments":
    {...}}`` sidecar: in ``mitigations`` a name maps straight to its variables."""
    from aorta_tui.core.inputs import clip_for_message as clip

    if data.get("version") != 1 or isinstance(data.get("version"), bool):
        raise UsageError(f"{p}{_json_position(text, 'version')}: sidecar version "
                         f"{clip(data.get('version'), 40)} is not supported; aorta-tui reads "
                         "version 1", hint=_VERSIONED_HINT)
    for key in data:
        if key not in _VERSIONED_KEYS:
            raise UsageError(f"{p}{_json_position(text, str(key))}: unknown top-level key "
                             f"{clip(key, 60)}", hint=did_you_mean(str(key), _VERSIONED_KEYS)
                             + _VERSIONED_HINT)
    raw = data.get(section) or {}
    if not isinstance(raw, dict):
        raise UsageError(f"{p}{_json_position(text, section)}: {section} must be an object "
                         f"(name -> ...), got {type(raw).__name__}", hint=_VERSIONED_HINT)
    if len(raw) > MAX_SIDECAR_ENTRIES:
        raise UsageError(f"{p}: {len(raw)} {section}; at most {MAX_SIDECAR_ENTRIES}")
    out = []
    for name, payload in raw.items():
        if section == "mitigations":
            if not isinstance(payload, dict):
                raise UsageError(f"{p}{_json_position(text, name)}: mitigations.{clip(name, 60)} "
                                 f"must map variable names to strings, got "
                                 f"{type(payload).__name__}", hint=_VERSIONED_HINT)
            out.append({"name": name, "env": payload})
        else:
            out.append({"name": name, **(payload if isinstance(payload, dict) else
                                         {"_bad": payload})})
    return out


def load_sidecar_environments(path: str | Path) -> list[Environment]:
    """The ``environments`` of an upstream-format sidecar (the other format has none)."""
    from aorta_tui.core.inputs import clip_for_message as clip
    from aorta_tui.core.inputs import parse_json_text, read_input_text

    p = Path(path)
    text = read_input_text(p, what="mitigations sidecar", limit=MAX_SIDECAR_BYTES,
                           hint=_SIDECAR_HINT)
    if not text.strip():
        return []
    data = parse_json_text(text, where=str(p), what="mitigations sidecar", hint=_SIDECAR_HINT)
    if not isinstance(data, dict) or "version" not in data:
        return []
    out = []
    for e in _versioned_entries(p, text, data, "environments"):
        name = e.pop("name")
        where = f"{p}{_json_position(text, name)}: environments.{clip(name, 60)}"
        if "_bad" in e:
            raise UsageError(f"{where} must be an object", hint=_VERSIONED_HINT)
        if not MITIGATION_NAME_RE.fullmatch(name):
            raise UsageError(f"{where}: not an environment name",
                             hint="1-100 letters, digits, '.', '_' or '-'")
        unknown = sorted(set(e) - set(_SIDECAR_ENV_KEYS))
        if unknown:
            raise UsageError(f"{where}: unknown key {clip(unknown[0], 60)}",
                             hint=did_you_mean(unknown[0], _SIDECAR_ENV_KEYS) + "allowed: " + ", ".join(_SIDECAR_ENV_KEYS))
        for key in ("venv", "buck_target"):
            if e.get(key) is not None:
                raise UsageError(f"{where}.{key}: aorta-tui cannot run trials in a {key} "
                                 "environment (upstream's venv / buck2 launchers)",
                                 hint="use `docker` or a local environment, or remove the key")
        for key in ("docker", "description", "emulator", "mirage_profile"):
            if e.get(key) is not None and not isinstance(e[key], str):
                raise UsageError(f"{where}.{key} must be a string or null")
        if e.get("docker") is not None and (bad := docker_image_problem(e["docker"])):
            raise UsageError(f"{where}.docker: {bad[0]}", hint=bad[1])
        env = e.get("env") or {}
        if not isinstance(env, dict):
            raise UsageError(f"{where}.env must map variable names to strings",
                             hint='{"env": {"VAR": "value"}}')
        for k, v in env.items():
            if (problem := env_entry_problem(k, v)) is not None:
                raise UsageError(f"{where}.env: {problem[0]}", hint=problem[1])
        out.append(Environment(name=name, env=dict(env), docker=e.get("docker"),
                               description=(e.get("description") or "")[:1000], source=str(p),
                               emulator=e.get("emulator"), mirage_profile=e.get("mirage_profile")))
    return out


class Registry:
    """The merged view: built-ins, entry-point plugins and sidecar files."""

    def __init__(self, mitigation_files: Iterable[str | Path] = ()) -> None:
        mitigations: list[Mitigation] = list(BUILTIN_MITIGATIONS)
        for ep in _entry_points("aorta_tui.mitigations"):
            for m in _as_list(ep.load()):
                mitigations.append(_with_source(m, ep))
        for f in mitigation_files:
            mitigations.extend(load_sidecar_mitigations(f))
        self.mitigations: dict[str, Mitigation] = _merge("mitigation", mitigations)

        envs: list[Environment] = list(BUILTIN_ENVIRONMENTS)
        for ep in _entry_points("aorta_tui.environments"):
            for e in _as_list(ep.load()):
                envs.append(_with_source(e, ep))
        for f in mitigation_files:  # upstream's sidecars may define environments too
            envs.extend(load_sidecar_environments(f))
        self.environments: dict[str, Environment] = _merge("environment", envs)

    def fill_masked(self, values: Mapping[str, Mapping[str, str]]) -> None:
        """Put secret values kept in memory (``agent --env-candidate``) where a sidecar holds
        the mask for them: ``{mitigation: {VAR: value}}``. Only a masked entry is filled, so a
        value given here never replaces one a sidecar really set."""
        import dataclasses

        from aorta_tui.core.secrets import MASK

        for name, given in values.items():
            m = self.mitigations.get(name)
            if m is None:
                continue
            env = {k: given[k] if v == MASK and k in given else v for k, v in m.env.items()}
            self.mitigations[name] = dataclasses.replace(m, env=env)

    @property
    def workload_names(self) -> frozenset[str]:
        """The registered workloads (entry points: listed without importing any of them)."""
        return frozenset(workload_entry_points())

    def mitigation(self, name: str) -> Mitigation:
        try:
            return self.mitigations[name]
        except KeyError:
            raise UsageError(f"unknown mitigation {name!r}", hint=_suggest(name, self.mitigations,
                             "aorta-tui sweep list-mitigations")) from None

    def environment(self, spec: str | Mapping[str, Any]) -> Environment:
        if isinstance(spec, Mapping):
            return inline_environment(spec)
        try:
            return self.environments[spec]
        except KeyError:
            raise UsageError(f"unknown environment {spec!r}", hint=_suggest(spec, self.environments,
                             "aorta-tui sweep list-environments")) from None


def inline_environment(spec: Mapping[str, Any]) -> Environment:
    docker = spec.get("docker")
    env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    name = spec.get("name")
    if not name:
        # Two cells with one image but different variables are two environments.
        tag = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:6] if env else ""
        name = (f"docker:{docker}" if docker else "inline") + (f"+env-{tag}" if tag else "")
    name = str(name)
    return Environment(name=name, env=env, docker=docker, source="recipe")


def _suggest(name: str, known: Mapping[str, Any], command: str) -> str:
    close = did_you_mean_any(name, known)
    return f"{close} ({command} lists all)" if close else f"{command} lists all"


def _as_list(obj: object) -> list[Any]:
    if callable(obj) and not isinstance(obj, (Mitigation, Environment)):
        obj = obj()
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


_D = TypeVar("_D", bound="DataclassInstance")


def _with_source(item: _D, ep: EntryPoint) -> _D:
    from dataclasses import replace

    dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
    return replace(item, source=dist)


@lru_cache(maxsize=1)
def workload_entry_points() -> dict[str, Any]:
    eps: dict[str, Any] = {}
    for ep in _entry_points("aorta_tui.workloads"):
        if ep.name in eps and eps[ep.name].value != ep.value:
            raise UsageError(f"workload {ep.name!r} is registered twice ({eps[ep.name].value} and {ep.value})")
        eps[ep.name] = ep
    return eps


def load_workload(name: str) -> type[Workload]:
    """Import the class registered as ``name``. Raises a clear error for unknown names."""
    eps = workload_entry_points()
    if name not in eps and not_carried(name):
        raise EnvironmentProblem(str(not_carried(name)),
                                 hint="run this recipe with upstream's `aorta sweep run`; "
                                 "docs/compat.md lists what aorta-tui does not carry")
    if name not in eps:
        raise UsageError(
            f"unknown workload {name!r}",
            hint=_suggest(name, eps, "aorta-tui sweep list-workloads")
            + ("" if eps else "; is aorta-tui installed (pip install -e .)?"),
        )
    try:
        loaded: object = eps[name].load()
    except Exception as exc:
        raise EnvironmentProblem(f"workload {name!r} failed to import: {type(exc).__name__}: {exc}") from None
    from aorta_tui.core.inputs import clip_for_message
    from aorta_tui.registry.workload import Workload

    # what the entry point names is a plugin's to get wrong: said here, located, rather than
    # as an AttributeError on its first use (exit 70)
    if not (isinstance(loaded, type) and issubclass(loaded, Workload)):
        raise EnvironmentProblem(
            f"workload {name!r} (entry point {eps[name].value}) is not a Workload class: "
            f"found {type(loaded).__name__} {clip_for_message(loaded)}",
            hint="the plugin's [aorta_tui.workloads] entry point must name a subclass of "
                 "aorta_tui.registry.workload.Workload (docs/workloads.md)")
    return loaded


def merged_env(*layers: Mapping[str, str]) -> dict[str, str]:
    """Later layers win: environment < mitigations < recipe extra_env < cell extra_env."""
    out: dict[str, str] = {}
    for layer in layers:
        out.update(layer)
    return out


