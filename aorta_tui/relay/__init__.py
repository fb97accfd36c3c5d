"""An engine command as a child process read as typed events, and a sweep detached from the TUI (the detached relay)."""
