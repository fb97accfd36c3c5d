"""The exit status of an engine entry point (``python -m aorta_tui.hwqueue.child``,
``python -m aorta_tui.sweep.child``): the processes an engine starts instead of running the
command line as a child. The codes are the CLI's: 2 bad input, 3 the machine cannot do it,
70 a bug (its traceback on stderr, which the parent shows), 130 interrupted."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from aorta_tui.core.errors import AortaError, ExitCode


def run_entry(body: Callable[[], int]) -> int:
    """``body()``'s status, or the status of what it raised; the message on stderr."""
    try:
        return body()
    except AortaError as exc:
        print(f"error: {exc.render()}", file=sys.stderr, flush=True)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except Exception:  # the parent shows these lines; nothing else would
        traceback.print_exc()
        return int(ExitCode.INTERNAL)
