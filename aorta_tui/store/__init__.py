"""The run directory: its lock, journal and result files, the one owner of a run (RunStore), and reading a journal back."""
