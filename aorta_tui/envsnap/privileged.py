"""The helper's snapshot verb (root side): the fields only root can read, by name.

``snapshot_field`` takes one name of :data:`aorta_tui.envsnap.capture.host.ROOT_ONLY_FIELDS`
(the kernel log's GPU error count, the number of tracefs events) and answers that field's leaf,
read as root. No path, no command: the name picks a function of the tool's.
"""

from __future__ import annotations

from typing import Any

from aorta_tui.privsep import protocol as P
from aorta_tui.privsep.helper import Result, Verb, VerbFamily


def _names() -> tuple[str, ...]:
    from aorta_tui.envsnap.capture.host import ROOT_ONLY_FIELDS

    return tuple(ROOT_ONLY_FIELDS)


def _snapshot_field(args: dict[str, Any]) -> Result:
    from aorta_tui.envsnap.capture.host import ROOT_ONLY_FIELDS

    return {"leaf": ROOT_ONLY_FIELDS[args["name"]]()}, ()


def family() -> VerbFamily:
    return VerbFamily(verbs={"snapshot_field": Verb({"name": P.OneOf(_names)}, _snapshot_field)})
