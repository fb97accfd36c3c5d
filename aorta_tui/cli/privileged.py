"""What the privileged helper may do: the verb families of the packages that own each job.

Handed to :func:`aorta_tui.privsep.boot.drop_if_sudo`, which calls it in the helper process
(root) only: the tracing verbs (``trace/privileged.py``), the GPU knobs of the policy presets
(``policy/privileged.py``) and the root-only snapshot fields (``envsnap/privileged.py``).
docs/security.md lists every verb and its checks.
"""

from __future__ import annotations

from aorta_tui.privsep.helper import VerbFamily


def load_verbs() -> list[VerbFamily]:
    from aorta_tui.envsnap import privileged as envsnap_verbs
    from aorta_tui.policy import privileged as policy_verbs
    from aorta_tui.trace import privileged as trace_verbs

    return [trace_verbs.family(), policy_verbs.family(), envsnap_verbs.family()]
