"""External tools a trial runs under (rocprofv3, ncu, ...): found once, the same way for each.

``$<TOOL>_BIN`` first (a path, or a name looked up on PATH), then the tool's own name on PATH;
when there is none, a sentence that says which was tried and where the tool comes from.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping


def find_tool(name: str, env_var: str, ships_with: str,
              environ: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """(the executable to run, "") or (None, why there is none)."""
    override = environ.get(env_var)
    if override:
        override = os.path.expanduser(override)
        if os.path.dirname(override):
            if os.path.isfile(override) and os.access(override, os.X_OK):
                return os.path.abspath(override), ""
            return None, f"{env_var}={override!r} is not an executable file"
        found = shutil.which(override, path=environ.get("PATH"))
        return (found, "") if found else (None, f"{env_var}={override!r} is not on PATH")
    found = shutil.which(name, path=environ.get("PATH"))
    if found:
        return found, ""
    return None, f"{name} is not on PATH and ${env_var} is not set ({ships_with})"
