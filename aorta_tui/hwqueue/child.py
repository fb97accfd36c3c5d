"""One queue run in a fresh process: ``python -m aorta_tui.hwqueue.child CONFIG.json RESULT.json``.

``queue sweep`` (one process per point) and ``queue run --repeat`` start this. The parent
writes the :class:`QueueRunConfig` as JSON, so every field reaches the child as it is, with no
command line to keep in step with the dataclass. The exit status is the CLI's: 2 bad input,
3 the machine cannot do it, 70 a bug (traceback on stderr), 130 interrupted; the message is
the last lines of stderr.
"""

from __future__ import annotations

import sys
import traceback
from typing import TypeVar

from aorta_tui.core.errors import AortaError, ExitCode

_Config = TypeVar("_Config")


def main(argv: list[str]) -> int:
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.run import run_queue

    config_path, output = argv
    try:
        cfg = _load_config(QueueRunConfig, config_path)
        run_queue(cfg, output=output)
    except AortaError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except Exception:  # the parent shows these lines; nothing else would
        traceback.print_exc()
        return int(ExitCode.INTERNAL)
    return 0


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
