"""One queue run in a fresh process: ``python -m aorta_tui.hwqueue.child CONFIG.json RESULT.json``.

``queue sweep`` (one process per point) and ``queue run --repeat`` start this. The parent
writes the :class:`QueueRunConfig` as JSON, so every field reaches the child as it is, with no
command line to keep in step with the dataclass. The exit status is the CLI's: 2 bad input,
3 the machine cannot do it, 70 a bug (traceback on stderr), 130 interrupted; the message is
the last lines of stderr.
"""

from __future__ import annotations

import sys
from typing import TypeVar

_Config = TypeVar("_Config")


def main(argv: list[str]) -> int:
    from aorta_tui.core.engine_entry import run_entry
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.run import run_queue

    config_path, output = argv

    def body() -> int:
        run_queue(_load_config(QueueRunConfig, config_path), output=output)
        return 0

    return run_entry(body)


def _load_config(cls: type[_Config], path: str) -> _Config:
    """The parent's config file as ``cls``: read as an input (size limit, located JSON/UTF-8
    errors), then checked field by field as a queue sweep's request.json is."""
    from pathlib import Path

    from aorta_tui.core.inputs import load_json_input, require_object
    from aorta_tui.hwqueue.sweep import checked_config

    what = "queue run config"
    data = require_object(load_json_input(path, what=what, limit=1 << 20), where=path, what=what)
    return cls(**checked_config(data, Path(path),
                                hint="the file is written by the parent queue run of this aorta-tui version"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
