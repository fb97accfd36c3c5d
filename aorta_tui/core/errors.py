"""Typed exit codes and the one error type that the CLI turns into a message.

Every error the user can cause carries what went wrong, where, and how to fix it. The CLI
prints ``AortaError`` as a paragraph and exits with its code; nothing else reaches the user as
a traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURES = 1  # failures found (with --strict) or relevant differences (env diff)
    USAGE = 2  # bad arguments, bad recipe, bad input file
    ENVIRONMENT = 3  # the machine cannot do it: no GPU, no bpftrace, no privilege, no docker
    INTERNAL = 70  # EX_SOFTWARE: a bug in aorta-tui (the CLI saves the traceback to a file)
    INTERRUPTED = 130


class AortaError(Exception):
    """An error with a user-facing message, an optional fix, and a typed exit code."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        exit_code: ExitCode | None = None,
        location: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.location = location
        if exit_code is not None:
            self.exit_code = exit_code

    def render(self) -> str:
        head = f"{self.location}: {self.message}" if self.location else self.message
        return f"{head}\n  fix: {self.hint}" if self.hint else head


class UsageError(AortaError):
    exit_code = ExitCode.USAGE


class RecipeError(AortaError):
    exit_code = ExitCode.USAGE


class EnvironmentProblem(AortaError):
    """The machine lacks something the request needs (GPU, bpftrace, privilege, docker)."""

    exit_code = ExitCode.ENVIRONMENT


class RunDirError(AortaError):
    exit_code = ExitCode.USAGE


class RunDirRefused(EnvironmentProblem):
    """Something in a run directory is not what the tool reads or writes there: a link, a
    FIFO, a device, a file swapped while it was written (exit 3; ``core/rundir_fs.py``)."""
