"""One queue run in a fresh process: ``python -m aorta_tui.hwqueue.child CONFIG.json RESULT.json``.

``queue sweep`` (one process per point) and ``queue run --repeat`` start this. The parent
writes the :class:`QueueRunConfig` as JSON (its typed form: ``hwqueue/point_config.py``), so
every field reaches the child as it is, with no command line to keep in step with the
dataclass. The exit status is the CLI's: 2 bad input,
3 the machine cannot do it, 70 a bug (traceback on stderr), 130 interrupted; the message is
the last lines of stderr.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from aorta_tui.core.engine_entry import run_entry
    from aorta_tui.hwqueue.point_config import PointConfig
    from aorta_tui.hwqueue.run import run_queue

    config_path, output = argv

    def body() -> int:
        # the one reader: a damaged file is a located exit 2 (hwqueue/point_config.py)
        run_queue(PointConfig.read(config_path).config(), output=output)
        return 0

    return run_entry(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
