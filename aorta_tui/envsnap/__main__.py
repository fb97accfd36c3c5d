"""``python -m aorta_tui.envsnap --output PATH [--no-torch] [--timeout S]``

Writes a snapshot of *this process's* environment atomically and exits 0 even when sections
fail (their fields say why). The sweep runs it inside a worker started with an environment's
variables. Standard library only (argparse), so it runs under any interpreter that can import
the package, including as a non-root user.
"""

from __future__ import annotations

import argparse
import sys

from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import ExitCode
from aorta_tui.envsnap import capture_snapshot, snapshot_hash


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aorta_tui.envsnap",
                                     description="Write an environment snapshot (env.json).")
    parser.add_argument("--output", "-o", required=True, help="where to write the snapshot")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch section")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds for the whole capture")
    args = parser.parse_args(argv)
    snapshot = capture_snapshot(timeout_s=args.timeout, include_torch=not args.no_torch)
    try:
        atomic_write_json(args.output, snapshot.to_json())
    except OSError as exc:
        # exit 3 (the machine's problem) with the errno, which the sweep that started this
        # capture turns back into its own typed error naming the file (sweep/snapshots.py)
        print(f"error: cannot write {args.output}: {exc.strerror or exc} [errno {exc.errno}]",
              file=sys.stderr)
        return int(ExitCode.ENVIRONMENT)
    print(f"{args.output} {snapshot_hash(snapshot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
