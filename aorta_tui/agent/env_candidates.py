"""Environment variables as agent candidates: ``--env-candidate VAR=VALUE``.

The search space is not only the registered mitigations: a user often suspects one variable
(``NCCL_ALGO=Ring``, ``HSA_ENABLE_SDMA=0``) that no mitigation sets. Each such setting becomes
a mitigation of a sidecar the agent writes into its own directory, so the sweeps, the pair
rule (two settings of one variable never share a cell) and ``agent.json`` treat it exactly like
a registered one, under a name that says what it sets: ``env.NCCL_ALGO.Ring``.

A secret-named variable (``HF_TOKEN``, ``DB_PASSWORD``) is named ``env.HF_TOKEN.secret-1``
and its value is kept in memory only: the sidecar holds the mask for it, and each
iteration's sweep gets the value through an inherited pipe (core/secrets.py). A resume needs
it again: ``agent --resume DIR --env-candidate HF_TOKEN=...``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from aorta_tui.core.errors import UsageError

if TYPE_CHECKING:
    from aorta_tui.agent.records import MitigationsSidecar

SIDECAR_NAME = "env-candidates.mitigations.json"
PREFIX = "env."
_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")
MAX_NAME = 100  # the registry's mitigation name limit


def parse(settings: list[str]) -> dict[str, tuple[str, str]]:
    """``VAR=VALUE`` strings -> {mitigation name: (VAR, VALUE)}; a bad one is exit 2."""
    from aorta_tui.core.secrets import is_secret_name
    from aorta_tui.recipe.checks import env_entry_problem

    out: dict[str, tuple[str, str]] = {}
    for text in settings:
        var, sep, value = text.partition("=")
        secret = is_secret_name(var)
        shown = f"{var}=<masked: secret>" if secret else text  # a token is never echoed
        if not sep:
            raise UsageError(f"--env-candidate {var!r}: expected VAR=VALUE",
                             hint="e.g. --env-candidate NCCL_ALGO=Ring (repeat it for more)")
        problem = env_entry_problem(var, value)
        if problem is not None:
            raise UsageError(f"--env-candidate {shown!r}: {problem[0]}", hint=problem[1])
        if "\n" in value or "\r" in value:
            raise UsageError(f"--env-candidate {var}=...: the value holds a line break",
                             hint="one line per value; pass multi-line data in a file")
        if (var, value) in out.values():
            raise UsageError(f"--env-candidate {shown}: given twice")
        name = candidate_name(var, value) if not secret else _secret_name(var, out)
        out[name] = (var, value)
    return out


def _secret_name(var: str, taken: dict[str, tuple[str, str]]) -> str:
    """``env.HF_TOKEN.secret-1``: a secret's value never enters a name (names are printed,
    sent to the llm proposer and written in every run)."""
    n = 1 + sum(1 for v, _value in taken.values() if v == var)
    return f"{PREFIX}{var}.secret-{n}"


def candidate_name(var: str, value: str) -> str:
    """A registry name that reads as the setting; a hash keeps two values apart when the
    value had to be changed to fit the name rules (``/``, ``=``, spaces, length)."""
    shown = _UNSAFE.sub("_", value).strip("._") or "empty"
    name = f"{PREFIX}{var}.{shown}"
    if shown != value or len(name) > MAX_NAME:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}.{digest}"
    return name.replace("--", "-_")  # "--" joins a pair's names


def secret_values(candidates: dict[str, tuple[str, str]]) -> dict[str, dict[str, str]]:
    """``{name: {VAR: value}}`` of the secret-named settings: what stays in memory only."""
    from aorta_tui.core.secrets import is_secret_name

    return {name: {var: value} for name, (var, value) in candidates.items()
            if is_secret_name(var)}


def write_sidecar(agent_dir: Path, candidates: dict[str, tuple[str, str]]) -> Path:
    """The sidecar every iteration's sweep loads (``--mitigations-file``); a secret's value is
    the mask there (the sweep fills it in from memory: :func:`secret_values`)."""
    from aorta_tui.core.atomic import atomic_write_bytes, json_bytes

    path = agent_dir / SIDECAR_NAME
    # mode 0600 like the agent's copy of the recipe; json_bytes writes the bytes json.dumps
    # (indent 2, not ASCII-escaped, a final newline) did, and escapes a lone surrogate (an
    # undecodable byte of the command line) where that raised UnicodeEncodeError
    atomic_write_bytes(path, json_bytes(sidecar(candidates).to_json()), mode=0o600)
    return path


def sidecar(candidates: dict[str, tuple[str, str]]) -> MitigationsSidecar:
    """The settings as mitigations, each setting one variable (a secret's value the mask)."""
    from aorta_tui.agent.records import MitigationsSidecar, SidecarEntry
    from aorta_tui.core.secrets import MASK, is_secret_name

    return MitigationsSidecar(tuple(
        SidecarEntry(name, {var: MASK if is_secret_name(var) else value},
                     f"agent candidate: sets {var}")
        for name, (var, value) in candidates.items()))


def resume_values(wanted: dict[str, str], settings: list[str], agent_dir: Path
                  ) -> dict[str, dict[str, str]]:
    """The secret values a resume needs (``wanted``: {name: VAR} from agent.json), from its
    ``--env-candidate VAR=VALUE`` given again in the order first given; exit 2 naming what is
    missing, since a run without them would not be the run that was started."""
    parsed = parse(settings)
    given = secret_values(parsed)
    extra = [name for name in parsed if name not in given or name not in wanted]
    if extra:
        var = parsed[extra[0]][0]
        raise UsageError(f"--resume {agent_dir}: --env-candidate {var}=... is not one of this "
                         "agent's secret settings (only those are given again; the others are "
                         "in its sidecar)", hint=_resume_hint(wanted, agent_dir))
    missing = [n for n in wanted if n not in given]
    if missing:
        raise UsageError(f"--resume {agent_dir}: the value of {wanted[missing[0]]} "
                         f"({missing[0]}, agent.json `secret_candidates`) is needed again: it "
                         "was kept in memory only, never written", hint=_resume_hint(wanted, agent_dir))
    return given


def _resume_hint(wanted: dict[str, str], agent_dir: Path) -> str:
    again = " ".join(f"--env-candidate {var}=..." for var in wanted.values())
    return (f"aorta-tui agent --resume {agent_dir} {again} (the same values, in the order "
            "first given; the agent keeps no copy to check them against)")
