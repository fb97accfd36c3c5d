"""One queue run end to end: execute the harness, build the result document, write it.

Above both :mod:`aorta_tui.hwqueue.harness` (which measures) and
:mod:`aorta_tui.hwqueue.result` (which turns a raw run into the schema-v1 document and reads
the harness's types), so neither imports the other back (they were an import cycle, hidden by
a lazy import in the harness).
"""

from __future__ import annotations

import os

from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.events import Measurement, ResultWritten
from aorta_tui.hwqueue.harness import EventCallback, QueueRunConfig, execute
from aorta_tui.hwqueue.result import new_run_id, queue_result
from aorta_tui.hwqueue.result_doc import QueueResult
from aorta_tui.store.write_errors import output_write_error


def run_queue(cfg: QueueRunConfig, on_event: EventCallback | None = None,
              output: str | os.PathLike[str] | None = None) -> QueueResult:
    """Run one workload at one stream count; returns the typed result (schema v1).

    With ``output`` the result is also written there atomically and ``ResultWritten`` emitted.
    """
    cfg.validate()
    if not cfg.run_id:
        cfg.run_id = new_run_id()
    raw = execute(cfg, on_event)
    result = queue_result(cfg, raw)
    if on_event is not None:
        on_event(Measurement(cfg.run_id, source="queue", name=cfg.workload,
                             values=dict(result.summary.values), reasons=dict(result.unavailable)))
    if output is not None:
        try:
            atomic_write_json(output, result.to_json())
        except OSError as exc:  # a full disk: exit 3 naming the file and the free space
            raise output_write_error(exc, output) from None
        if on_event is not None:
            on_event(ResultWritten(cfg.run_id, path=str(output), what="queue result"))
    return result
